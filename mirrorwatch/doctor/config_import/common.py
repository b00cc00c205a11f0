"""What both importers share: the result, the problem line, MM2's pattern lists and replication policies, and
Java client settings turned into librdkafka's (secrets become ``${ENV}`` references, never values)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# MM2 4.x's defaults when a filter is left unset (Kafka: connect/mirror/src/main/java/org/apache/kafka/connect/
# mirror/DefaultTopicFilter.java TOPICS_EXCLUDE_DEFAULT, DefaultGroupFilter.java GROUPS_EXCLUDE_DEFAULT; the include
# defaults are ".*").
MM2_TOPICS_EXCLUDE_DEFAULT = r".*[\-\.]internal, .*\.replica, __.*"
MM2_GROUPS_EXCLUDE_DEFAULT = "console-consumer-.*, connect-.*, __.*"

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"


class ImportProblem(Exception):
    """Input that cannot be turned into a config, already phrased as one line (the command exits 2)."""


@dataclass(frozen=True)
class EnvRef:
    var: str
    where: str  # where the value lives: "Secret my-user key password", "a PEM file of ..."


@dataclass
class Imported:
    """A config to write: plain values plus what the YAML's comments say."""

    origin: str  # what it was written from, for the header
    clusters: dict[str, dict[str, str]] = field(default_factory=dict)
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    env: list[EnvRef] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be carried over, one line each
    comments: dict[tuple[str, ...], str] = field(default_factory=dict)  # end-of-line comment by key path
    trailers: dict[tuple[str, ...], list[str]] = field(default_factory=dict)  # commented lines closing a mapping

    def env_ref(self, var: str, where: str) -> str:
        if all(ref.var != var for ref in self.env):
            self.env.append(EnvRef(var, where))
        return "${" + var + "}"

    def note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)

    def config_dict(self) -> dict[str, Any]:
        return {"clusters": self.clusters, "flows": self.flows}


def env_name(alias: str, suffix: str) -> str:
    return f"MIRRORWATCH_{re.sub(r'[^A-Za-z0-9]', '_', alias).upper()}_{suffix}"


# ----------------------------------------------------------------------------- MM2's pattern lists


def split_list(value: str) -> list[str]:
    """A Kafka ConfigDef LIST value: the trimmed text split on commas and the blanks around them ('' → [])."""
    text = value.strip()
    return re.split(r"\s*,\s*", text) if text else []


def _top_level_alternatives(regex: str) -> list[str]:
    """``a|b(c|d)|[|]`` → ``a``, ``b(c|d)``, ``[|]``: full-matching ``a|b`` is full-matching ``a`` or ``b``."""
    parts, start, depth, in_class, i = [], 0, 0, 0, 0
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            if regex.startswith("\\Q", i):  # Java's quoted run: nothing inside counts
                end = regex.find("\\E", i + 2)
                i = len(regex) if end < 0 else end + 2
                continue
            i += 2
            continue
        if in_class:
            in_class += ch == "["
            in_class -= ch == "]"
        elif ch == "[":
            in_class = 1
            if regex.startswith("[]", i) or regex.startswith("[^]", i):  # a leading ']' is literal
                i += 2 if regex[i + 1] == "]" else 3
                continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(regex[start:i])
            start = i + 1
        i += 1
    parts.append(regex[start:])
    return parts


def java_regex_to_python(regex: str) -> str:
    """The few Java spellings Python's ``re`` writes differently; raises ValueError for what has no equivalent."""
    if "&&" in regex:
        raise ValueError("character class intersection (&&)")
    if re.search(r"\\p\{|\\P\{|\\[hHvRX]", regex):
        raise ValueError("a Java-only class (\\p{...}, \\h, \\v, \\R, \\X)")
    out = re.sub(r"\\Q(.*?)(?:\\E|$)", lambda m: re.escape(m.group(1)), regex)
    out = re.sub(r"\(\?<([A-Za-z])", r"(?P<\1", out)  # named group
    out = out.replace("\\z", "\\Z")
    re.compile(out)
    return out


def regex_list(value: str, what: str, imported: Imported) -> list[str]:
    """MM2's list of regexes (joined with '|', full match: Kafka's MirrorUtils.compilePatternList) as mirrorwatch's
    list of full-match regexes, one per top-level alternative. An empty value matches nothing, as in MM2."""
    fields = split_list(value)
    if not fields:
        return []
    out: list[str] = []
    for part in _top_level_alternatives("|".join(fields)):
        if not part:
            continue  # an empty alternative full-matches only the empty name, which no topic or group has
        try:
            converted = java_regex_to_python(part)
        except (ValueError, re.error) as exc:
            imported.note(f"{what}: the regex {part!r} has no Python equivalent ({exc}); left out, edit by hand")
            continue
        if converted not in out:
            out.append(converted)
    return out


def fold_exclude(includes: list[str], excludes: list[str]) -> list[str]:
    """Include regexes that also refuse what any exclude full-matches (for keys with no exclude list of their own)."""
    if not excludes:
        return includes
    joined = "|".join(excludes)
    return [f"(?!(?:{joined})\\Z)(?:{inc})" for inc in includes]


def policy_of(policy_class: str | None, where: str, imported: Imported) -> str:
    if policy_class is None or policy_class.strip() in ("", DEFAULT_POLICY):
        return "default"
    name = policy_class.strip()
    if name.rsplit(".", 1)[-1] == "IdentityReplicationPolicy":  # Kafka's, or an older Strimzi extension's
        return "identity"
    imported.note(
        f"{where}: replication.policy.class {name} is not one mirrorwatch knows; it assumes "
        "DefaultReplicationPolicy's naming (<source><separator><topic>): check mirror.policy"
    )
    return "default"


def seconds(value: Any, scale: float, where: str, imported: Imported) -> float | int | None:
    """A positive number of seconds from a setting given in seconds (scale 1) or ms (scale 1000); None if unusable."""
    try:
        number = float(str(value).strip()) / scale
    except ValueError:
        imported.note(f"{where}: {value!r} is not a number; left at the default")
        return None
    if number <= 0:
        imported.note(f"{where}: {value!r} is not positive; left at the default")
        return None
    return int(number) if number == int(number) else number


# ----------------------------------------------------------------------------- client settings


_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
}
_JAAS_OPTION = re.compile(r"""([A-Za-z0-9_.]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)""")
_CARRIED_AS_IS = ("security.protocol", "sasl.mechanism")


def _jaas(text: str) -> tuple[str | None, dict[str, str]]:
    module = text.strip().split(None, 1)[0] if text.strip() else None
    options = {}
    for key, raw in _JAAS_OPTION.findall(text):
        options[key] = raw[1:-1].replace('\\"', '"') if raw.startswith('"') else raw
    return module, options


def java_client_to_librdkafka(alias: str, props: dict[str, str], origin: str, imported: Imported) -> dict[str, str]:
    """A Java client's settings for one cluster (``bootstrap.servers``, ``security.protocol``, ``sasl.*``,
    ``ssl.*``) as librdkafka properties. Other client settings are left to librdkafka's defaults."""
    out = {"bootstrap.servers": props["bootstrap.servers"]}
    for key in _CARRIED_AS_IS:
        if props.get(key):
            out[key] = props[key].strip()
    jaas = props.get("sasl.jaas.config")
    if jaas:
        module, options = _jaas(jaas)
        if module in _JAAS_MODULES and "username" in options:
            out["sasl.username"] = options["username"]
            out["sasl.password"] = imported.env_ref(
                env_name(alias, "SASL_PASSWORD"), f"the password in {origin}'s {alias} sasl.jaas.config"
            )
        else:
            imported.note(
                f"clusters.{alias}: sasl.jaas.config with {module or 'no login module'} is not carried over "
                "(mirrorwatch takes SASL PLAIN/SCRAM as sasl.username/sasl.password); set it by hand"
            )
    _ssl(alias, props, origin, out, imported)
    handled = {"bootstrap.servers", "sasl.jaas.config", *_CARRIED_AS_IS}
    for key in sorted(props):
        if key in handled or key.startswith("ssl."):
            continue
        if key.startswith("sasl."):
            imported.note(f"clusters.{alias}: {key} is not carried over; set the librdkafka equivalent by hand")
    return out


_SSL_HANDLED = {
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
}


def _ssl(alias: str, props: dict[str, str], origin: str, out: dict[str, str], imported: Imported) -> None:
    trust = props.get("ssl.truststore.location")
    if trust:
        if props.get("ssl.truststore.type", "JKS").upper() == "PEM":
            out["ssl.ca.location"] = trust
        else:  # librdkafka reads CA certificates from PEM only
            out["ssl.ca.location"] = imported.env_ref(
                env_name(alias, "SSL_CA_LOCATION"),
                f"a PEM file of the CA certificates in truststore {trust} (keytool -exportcert -rfc)",
            )
            imported.note(f"clusters.{alias}: truststore {trust} is not PEM: export its CA certificates to a PEM file")
    keystore = props.get("ssl.keystore.location")
    if keystore:
        kind = props.get("ssl.keystore.type", "JKS").upper()
        if kind == "PKCS12":
            out["ssl.keystore.location"] = keystore
        elif kind == "JKS":
            out["ssl.keystore.location"] = imported.env_ref(
                env_name(alias, "SSL_KEYSTORE_LOCATION"),
                f"a PKCS#12 copy of keystore {keystore} (keytool -importkeystore -deststoretype PKCS12)",
            )
            imported.note(f"clusters.{alias}: keystore {keystore} is JKS: librdkafka needs a PKCS#12 copy")
        else:
            imported.note(
                f"clusters.{alias}: ssl.keystore.type {kind} is not carried over; set the client cert by hand"
            )
        if kind in ("PKCS12", "JKS"):
            out["ssl.keystore.password"] = imported.env_ref(
                env_name(alias, "SSL_KEYSTORE_PASSWORD"), f"the password of keystore {keystore} ({origin})"
            )
    algorithm = props.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        out["ssl.endpoint.identification.algorithm"] = algorithm.strip() or "none"
    for key in sorted(props):
        if key.startswith("ssl.") and key not in _SSL_HANDLED:
            imported.note(f"clusters.{alias}: {key} is not carried over; set the librdkafka equivalent by hand")
