"""docs/runbooks/: one page per alert of the shipped rules, indexed, with the sections an on-call engineer needs,
and every mirrorwatch command in them real: its subcommands and flags are looked up in the CLIs' own click
parsers (imported, not run), and every URL on a mirrorwatch port is a path that service answers."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from mirrorwatch.grafana_build import promql

ROOT = Path(__file__).resolve().parent.parent
RUNBOOKS = ROOT / "docs" / "runbooks"
INDEX = RUNBOOKS / "README.md"
SECTIONS = ("## What it means", "## First three commands", "## When it resolves itself")
SEVERITIES = {"critical", "warning", "none"}
# The service ports of docs/probes.md and docs/monitor.md: 9641 mirror, 9642 canary, 9643 monitor metrics, 9644 the
# monitor's HTTP API. The metrics ports answer /metrics and the probes only.
METRICS_PORTS = {"9641", "9642", "9643"}
API_PORT = "9644"
SEPARATORS = {";", "&&", "||", "|", "&"}
CLI_NAMES = ("canary", "monitor", "mirror", "mirrorwatch")


def alerts_in_rules() -> dict[str, dict]:
    return {r["alert"]: r for r in promql.rules_of(promql.load_rules(), "alert")}


def pages() -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted(RUNBOOKS.glob("*.md")) if p.name != "README.md"}


def every_text() -> dict[str, str]:
    """The pages and the index, whose commands and URLs are checked alike."""
    return {**pages(), "README": INDEX.read_text()}


def index_rows() -> dict[str, str]:
    """alert -> severity, from the index's table rows ``| [`Name`](Name.md) | severity | ... |``."""
    rows = {}
    for line in INDEX.read_text().splitlines():
        m = re.match(r"\| \[`(\w+)`\]\((\w+)\.md\) \| (\w+) \|", line)
        if m:
            assert m.group(1) == m.group(2), line
            rows[m.group(1)] = m.group(3)
    return rows


def test_every_alert_of_the_rules_has_its_page():
    missing = sorted(set(alerts_in_rules()) - set(pages()))
    assert not missing, f"alerts without a page in docs/runbooks/: {missing}"


def test_the_index_lists_every_page_once_with_a_severity():
    rows = index_rows()
    assert sorted(rows) == sorted(pages())
    assert set(rows.values()) <= SEVERITIES


def test_each_page_states_its_severity_as_the_index_does():
    rows = index_rows()
    for name, text in pages().items():
        assert text.startswith(f"# {name}\n"), name
        m = re.search(r"^\*\*Severity:\*\* `(\w+)`", text, re.M)
        assert m and m.group(1) == rows[name], name


def test_severity_and_for_as_the_rules_say():
    """The index's severity and each page's `for:` are the rule's, so a page never tells an old threshold."""
    rows, texts = index_rows(), pages()
    wrong = []
    for name, rule in alerts_in_rules().items():
        if rows.get(name) != rule["labels"]["severity"]:
            wrong.append(f"{name}: index says {rows.get(name)}, the rule {rule['labels']['severity']}")
        stated = re.search(r"\*\*for:\*\* `(\w+)`", texts.get(name, ""))
        if (stated.group(1) if stated else None) != rule.get("for", "0m"):
            wrong.append(f"{name}: page says for {stated and stated.group(1)}, the rule {rule.get('for', '0m')}")
    assert not wrong, "\n".join(wrong)


def test_runbook_urls_point_at_the_alerts_own_page():
    for name, rule in alerts_in_rules().items():
        url = rule.get("annotations", {}).get("runbook_url")
        if url is not None:
            assert url.endswith(f"docs/runbooks/{name}.md"), (name, url)


def test_every_page_has_the_three_sections():
    for name, text in pages().items():
        at = [text.find(s + "\n") for s in SECTIONS]
        assert all(i >= 0 for i in at) and at == sorted(at), f"{name}: sections {SECTIONS} in this order"


def test_flow_in_trouble_has_a_section_per_cause():
    text = pages()["MirrorwatchFlowInTrouble"]
    causes = re.findall(r"^### Cause (\d+): ", text, re.M)
    assert causes and causes == sorted(causes, key=int), causes
    rule = alerts_in_rules().get("MirrorwatchFlowInTrouble")
    if rule is not None:
        # The cause codes the rule's annotations tell apart (`eq $value N`): each has its section.
        told = set(re.findall(r"eq \$value (\d+)", str(rule.get("annotations", {}))))
        assert told <= set(causes), f"cause codes without a section: {sorted(told - set(causes))}"


# --- what silences what: the pages' two lines against the shipped Alertmanager configuration ---

ALERTMANAGER = ROOT / "grafana" / "alertmanager" / "alertmanager.yml"


def matches_name(matchers: list[str], name: str) -> bool:
    """Whether an alert named ``name`` can match these matchers: only the ``alertname`` ones are judged (the others,
    e.g. ``job="mirrorwatch-mirror"``, narrow which of its instances, and the page says so in words)."""
    for matcher in matchers:
        m = re.fullmatch(r'alertname(=~|!~|!=|=)"(.*)"', matcher.strip())
        if m is None:
            continue
        op, value = m.groups()
        hit = re.fullmatch(value, name) is not None if "~" in op else value == name
        if hit != (op in ("=", "=~")):
            return False
    return True


def page_labels(text: str) -> set[str]:
    header = text.split("\n## ")[0]
    labels = re.search(r"\*\*labels:\*\*(.*?)(?:·|\n\n)", header, re.S)
    assert labels, "the header names the alert's labels"
    return set(re.findall(r"`(\w+)`", labels.group(1)))


def silencers() -> dict[str, set[str]]:
    """alert -> the alerts whose inhibition rules can silence it. A rule with ``equal`` labels only silences an
    alert that has them (Alertmanager compares the values; a label the target lacks never equals the source's)."""
    doc = yaml.safe_load(ALERTMANAGER.read_text())
    names, texts = sorted(alerts_in_rules()), pages()
    out: dict[str, set[str]] = {n: set() for n in names}
    for rule in doc["inhibit_rules"]:
        sources = {n for n in names if matches_name(rule["source_matchers"], n)}
        for target in names:
            if matches_name(rule["target_matchers"], target) and set(rule.get("equal", [])) <= page_labels(
                texts[target]
            ):
                out[target] |= sources - {target}
    return out


def item(text: str, key: str) -> str | None:
    """The text of the page's ``- **<key>:** ...`` list item (it may wrap)."""
    m = re.search(rf"^- \*\*{key}:\*\* (.*?)(?=^\S|^- |\Z)", text, re.M | re.S)
    return None if m is None else " ".join(m.group(1).split())


def linked(text: str) -> set[str]:
    return set(re.findall(r"\]\((Mirrorwatch\w+)\.md\)", text))


def test_matches_name():
    assert matches_name(['alertname="A"'], "A") and not matches_name(['alertname="A"'], "B")
    assert matches_name(['alertname!~"A|B"', 'job="x"'], "C") and not matches_name(['alertname!~"A|B"'], "B")
    assert matches_name(['alertname=~"A|B"'], "A") and not matches_name(['alertname=~"A"'], "AB")


def test_each_page_says_what_silences_it_and_what_it_silences():
    """``Silenced by`` links exactly the alerts that can silence this one. ``Silences`` is ``nothing`` when it
    silences nothing; else every alert it links is one it silences, except those in an ``except (...)``."""
    by = silencers()
    silences: dict[str, set[str]] = {n: set() for n in by}
    for target, sources in by.items():
        for source in sources:
            silences[source].add(target)
    wrong = []
    for name, text in pages().items():
        said_by, said = item(text, "Silenced by"), item(text, "Silences")
        if said_by is None or said is None:
            wrong.append(f"{name}: a '- **Silences:**' and a '- **Silenced by:**' line")
            continue
        if linked(said_by) != by[name]:
            wrong.append(f"{name}: silenced by {sorted(linked(said_by))}, alertmanager.yml: {sorted(by[name])}")
        excepted = linked(" ".join(re.findall(r"except[^(]*\((.*?)\)(?=[;.]|$)", said)))
        if (said == "nothing.") != (not silences[name]) or linked(said) - excepted - silences[name]:
            wrong.append(f"{name}: silences {said!r}, alertmanager.yml: {sorted(silences[name])}")
        if excepted & silences[name]:
            wrong.append(f"{name}: says it does not silence {sorted(excepted & silences[name])}, but it does")
    assert not wrong, "\n".join(wrong)


# --- the commands ---


def code_lines(text: str) -> list[str]:
    """The lines of the page's fenced code blocks (shell), continuation lines joined, comments dropped."""
    lines, inside, pending = [], False, ""
    for raw in text.splitlines():
        if raw.startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line and not line.startswith("#"):
            lines.append(line.removeprefix("$ "))
    return lines


def segments(line: str) -> list[list[str]]:
    """A shell line split into its simple commands (at ; && || | &)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = ""
    out: list[list[str]] = [[]]
    for token in lex:
        if token in SEPARATORS:
            out.append([])
        else:
            out[-1].append(token)
    return [s for s in out if s]


def mirrorwatch_clis() -> dict[str, click.Group]:
    from mirrorwatch.canary.cli import cli as canary
    from mirrorwatch.doctor.cli import cli as mirrorwatch
    from mirrorwatch.mirror.cli import cli as mirror
    from mirrorwatch.monitor.cli import cli as monitor

    return {"canary": canary, "monitor": monitor, "mirror": mirror, "mirrorwatch": mirrorwatch}


def unknown_parts(clis: dict[str, click.Group], argv: list[str]) -> list[str]:
    """What in ``argv`` (a mirrorwatch command line) its CLI does not know: subcommands and options."""
    command: click.Command = clis[argv[0]]
    path, rest = argv[:1], argv[1:]
    while isinstance(command, click.Group):
        ctx = click.Context(command)
        names = command.list_commands(ctx)  # the lazy ones too (core.cli.LazyGroup)
        if not rest or rest[0] not in names:
            return [f"{' '.join(path)}: no subcommand {rest[:1]} (has {sorted(names)})"]
        command, path, rest = command.get_command(ctx, rest[0]), [*path, rest[0]], rest[1:]
    options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    return [f"{' '.join(path)}: no option {a}" for a in rest if a.startswith("-") and a.split("=")[0] not in options]


def inline_code(text: str) -> list[str]:
    """The page's inline code spans outside its fenced blocks (a span may wrap onto the next line)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]


def commands_of(text: str) -> list[list[str]]:
    """Every mirrorwatch command on a page, in code blocks and inline, also behind ``kubectl exec ... --``."""
    spans = [s for s in inline_code(text) if s.split()[0] in CLI_NAMES + ("kubectl",) and len(s.split()) > 1]
    out = []
    for line in code_lines(text) + spans:
        for argv in segments(line):
            if argv[0] == "kubectl" and "--" in argv:
                argv = argv[argv.index("--") + 1 :]
            if argv and argv[0] in CLI_NAMES:
                out.append(argv)
    return out


def test_the_command_checker_catches_a_wrong_flag_and_subcommand():
    clis = mirrorwatch_clis()
    assert unknown_parts(clis, ["canary", "check", "--config", "c.yml", "--flow", "f", "--json"]) == []
    assert unknown_parts(clis, ["mirror", "failover", "check", "--config", "c", "--timeout", "5"]) == []
    assert unknown_parts(clis, ["monitor", "lag", "--config", "c", "--since", "5"]) == [
        "monitor lag: no option --since"
    ]
    assert unknown_parts(clis, ["canary", "probe"])
    text = '```sh\nkubectl -n "$NS" exec deploy/x -- monitor lag --config "$CONFIG" --flow "$FLOW" | head\n```\n'
    text += "Or `canary check --config c\n--json`, not `mirror.on_records_lost: stop`.\n"
    assert commands_of(text) == [
        ["monitor", "lag", "--config", "$CONFIG", "--flow", "$FLOW"],
        ["canary", "check", "--config", "c", "--json"],
    ]


def test_every_mirrorwatch_command_on_the_pages_is_real():
    clis = mirrorwatch_clis()
    wrong, seen = [], 0
    for name, text in every_text().items():
        for argv in commands_of(text):
            seen += 1
            wrong += [f"{name}: {w}" for w in unknown_parts(clis, argv)]
    assert seen >= len(pages()), "hardly any commands found: is the code-block parser right?"
    assert not wrong, "\n".join(wrong)


def api_paths() -> list[re.Pattern]:
    """The monitor API's paths, from its table in docs/monitor.md (`/v1/flows/{flow}` → a pattern)."""
    text = (ROOT / "docs" / "monitor.md").read_text()
    table = text[text.index("## HTTP API") :]
    table = table[: table.index("\n## ")]
    paths = set()
    for cell in re.findall(r"^\| ([^|]+) \|", table, re.M):
        paths |= set(re.findall(r"`(/[^`\[]*)", cell))
    assert "/v1/flows/{flow}" in paths and "/readyz" in paths, paths
    return [re.compile(re.sub(r"\\\{\w+\\\}", r"[^/]+", re.escape(p)) + r"(\?.*)?") for p in paths]


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://h:9644/v1/flows/$FLOW", True),
        ("http://h:9644/v3/kafka/$CLUSTER/consumer/$GROUP/status", True),
        ("http://h:9644/v1/flow/$FLOW", False),
        ("http://h:9642/readyz", True),
        ("http://h:9641/v1/flows", False),
    ],
)
def test_the_url_checker(url, ok):
    assert (url_problem(url, api_paths()) is None) == ok


def url_problem(url: str, api: list[re.Pattern]) -> str | None:
    m = re.search(r":(\d{4})(/[^\s\"']*)?", url)
    if m is None or m.group(1) not in METRICS_PORTS | {API_PORT}:
        return None  # not a mirrorwatch service (Connect's REST API, Prometheus...)
    path = m.group(2) or "/"
    if m.group(1) in METRICS_PORTS:
        return None if path in ("/metrics", "/healthz", "/readyz") else f"{url}: the metrics ports answer no {path}"
    return None if any(p.fullmatch(path) for p in api) else f"{url}: the monitor's API has no {path}"


def test_every_url_on_a_mirrorwatch_port_is_a_path_it_answers():
    api = api_paths()
    wrong = []
    for name, text in every_text().items():
        for line in code_lines(text) + inline_code(text):
            for url in re.findall(r"https?://[^\s\"']+", line):
                problem = url_problem(url, api)
                if problem:
                    wrong.append(f"{name}: {problem}")
    assert not wrong, "\n".join(wrong)


def test_alerts_md_links_the_runbooks():
    intro = (ROOT / "docs" / "alerts.md").read_text().split("\n## ")[0]
    assert "runbooks/README.md" in intro
