{{/* Names and labels, as `helm create` makes them. */}}
{{- define "mirrorwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mirrorwatch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A component's object name: (list $ "monitor") -> <fullname>-monitor, DNS-safe. */}}
{{- define "mirrorwatch.componentName" -}}
{{- $root := index . 0 -}}
{{- $name := printf "%s-%s" (include "mirrorwatch.fullname" $root) (index . 1) | lower -}}
{{- regexReplaceAll "[^a-z0-9-]" $name "-" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mirrorwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mirrorwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mirrorwatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mirrorwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mirrorwatch
{{- end -}}

{{- define "mirrorwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mirrorwatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "mirrorwatch.secretName" -}}
{{- if .Values.secret.existingSecret -}}
{{- .Values.secret.existingSecret -}}
{{- else if .Values.secret.create -}}
{{- include "mirrorwatch.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* A port from the user's config section, else mirrorwatch's default: (list $ "monitor" "metrics_port" 9643).
     0 and null (mirrorwatch's "any free port" / "off") take the default: a Service needs a fixed port. */}}
{{- define "mirrorwatch.port" -}}
{{- $root := index . 0 -}}
{{- $section := index ($root.Values.config | default dict) (index . 1) | default dict -}}
{{- index $section (index . 2) | default (index . 3) | int -}}
{{- end -}}

{{/* The mirrorwatch config every pod reads: the user's config with what the pods need set over it. */}}
{{- define "mirrorwatch.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- if not (and (index $cfg "clusters") (index $cfg "flows")) -}}
{{- fail "config: set config.clusters and config.flows (the mirrorwatch config, docs/config.md; chart values in docs/deploy.md)" -}}
{{- end -}}
{{- $leader := index $cfg "leader" | default dict -}}
{{- if not (hasKey $leader "enabled") -}}{{- $_ := set $leader "enabled" true -}}{{- end -}}
{{- $_ := set $cfg "leader" $leader -}}
{{- $monitor := index $cfg "monitor" | default dict -}}
{{- $_ := set $monitor "host" "0.0.0.0" -}}
{{- $_ := set $monitor "http_port" (include "mirrorwatch.port" (list . "monitor" "http_port" 9644) | int) -}}
{{- $_ := set $monitor "metrics_port" (include "mirrorwatch.port" (list . "monitor" "metrics_port" 9643) | int) -}}
{{- $_ := set $monitor "history_dir" "/var/lib/mirrorwatch/history" -}}
{{- $_ := set $cfg "monitor" $monitor -}}
{{- $canary := index $cfg "canary" | default dict -}}
{{- $_ := set $canary "metrics_host" "0.0.0.0" -}}
{{- $_ := set $canary "metrics_port" (include "mirrorwatch.port" (list . "canary" "metrics_port" 9642) | int) -}}
{{- $_ := set $cfg "canary" $canary -}}
{{- $mirror := index $cfg "mirror" | default dict -}}
{{- $_ := set $mirror "metrics_host" "0.0.0.0" -}}
{{- $_ := set $mirror "metrics_port" (include "mirrorwatch.port" (list . "mirror" "metrics_port" 9641) | int) -}}
{{- $_ := set $cfg "mirror" $mirror -}}
{{- $dashboard := index $cfg "dashboard" | default dict -}}
{{- $_ := set $dashboard "host" "0.0.0.0" -}}
{{- $_ := set $dashboard "port" (include "mirrorwatch.port" (list . "dashboard" "port" 8501) | int) -}}
{{- $_ := set $dashboard "analytics_dir" "/var/lib/mirrorwatch/analytics" -}}
{{- $_ := set $dashboard "monitor_url" (printf "http://%s:%d" (include "mirrorwatch.componentName" (list . "monitor")) (index $monitor "http_port")) -}}
{{- if .Values.canary.enabled -}}
{{- $_ := set $dashboard "canary_url" (printf "http://%s:%d/metrics" (include "mirrorwatch.componentName" (list . "canary")) (index $canary "metrics_port")) -}}
{{- else -}}
{{- $_ := set $dashboard "canary_url" "" -}}
{{- end -}}
{{- $_ := set $cfg "dashboard" $dashboard -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Probe timings: the component's own `probes.<kind>` replace the shared ones. (list $ $componentValues "liveness") */}}
{{- define "mirrorwatch.probeTimings" -}}
{{- $root := index . 0 -}}
{{- $own := (index . 1).probes | default dict -}}
{{- toYaml (index $own (index . 2) | default (index $root.Values.probes (index . 2))) -}}
{{- end -}}

{{/* The pod template every component shares. Argument: a dict with
     root, component, values (the component's values), args (the container's command line), ports (list of
     {name, port}), probePort, healthPath, readyPath, extraLabels, extraMounts, extraVolumes. */}}
{{- define "mirrorwatch.podTemplate" -}}
{{- $root := .root -}}
{{- $v := .values -}}
metadata:
  labels:
    {{- include "mirrorwatch.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with .extraLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with $root.Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # A changed config or Secret rolls the pods (the services read both only at start).
    checksum/config: {{ include "mirrorwatch.config" $root | sha256sum }}
    {{- if and $root.Values.secret.create (not $root.Values.secret.existingSecret) }}
    checksum/secret: {{ toYaml $root.Values.secret.stringData | sha256sum }}
    {{- end }}
    {{- with $root.Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "mirrorwatch.serviceAccountName" $root }}
  automountServiceAccountToken: {{ $root.Values.serviceAccount.automountToken }}
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  containers:
    - name: {{ .component }}
      image: {{ include "mirrorwatch.image" (list $root .component) | quote }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        {{- toYaml .args | nindent 8 }}
      env:
        # Streamlit, Spark and Python write their caches under HOME; the root filesystem is read-only.
        - name: HOME
          value: /tmp
        {{- with $root.Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with include "mirrorwatch.secretName" $root }}
      envFrom:
        - secretRef:
            name: {{ . }}
      {{- end }}
      ports:
        {{- range .ports }}
        - name: {{ .name }}
          containerPort: {{ .port }}
          protocol: TCP
        {{- end }}
      startupProbe:
        httpGet: {path: {{ .healthPath }}, port: {{ .probePort }}}
        {{- include "mirrorwatch.probeTimings" (list $root $v "startup") | nindent 8 }}
      livenessProbe:
        httpGet: {path: {{ .healthPath }}, port: {{ .probePort }}}
        {{- include "mirrorwatch.probeTimings" (list $root $v "liveness") | nindent 8 }}
      readinessProbe:
        httpGet: {path: {{ .readyPath }}, port: {{ .probePort }}}
        {{- include "mirrorwatch.probeTimings" (list $root $v "readiness") | nindent 8 }}
      {{- with $v.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      volumeMounts:
        # The file alone (subPath), so that volumes mounted under /etc/mirrorwatch (CA certificates) need no
        # mount point inside the read-only ConfigMap volume; a changed config rolls the pods (checksum above).
        - name: config
          mountPath: /etc/mirrorwatch/config.yml
          subPath: config.yml
          readOnly: true
        - name: tmp
          mountPath: /tmp
        - name: state
          mountPath: /var/lib/mirrorwatch
        {{- with .extraMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $root.Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "mirrorwatch.fullname" $root }}
    - name: tmp
      emptyDir: {}
    {{- if not .stateClaim }}
    - name: state
      emptyDir: {}
    {{- end }}
    {{- with .extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with $root.Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $root.Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  affinity:
    {{- if $root.Values.affinity }}
    {{- toYaml $root.Values.affinity | nindent 4 }}
    {{- else }}
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "mirrorwatch.selectorLabels" $root | nindent 16 }}
                app.kubernetes.io/component: {{ .component }}
                {{- with .extraLabels }}
                {{- toYaml . | nindent 16 }}
                {{- end }}
    {{- end }}
{{- end -}}

{{/* The analytics volume the monitor and the page share, when analytics.sharedClaim names one. */}}
{{- define "mirrorwatch.analyticsVolume" -}}
{{- if .Values.analytics.sharedClaim -}}
- name: analytics
  persistentVolumeClaim:
    claimName: {{ .Values.analytics.sharedClaim }}
{{- end -}}
{{- end -}}
{{- define "mirrorwatch.analyticsMount" -}}
{{- if .Values.analytics.sharedClaim -}}
- name: analytics
  mountPath: /var/lib/mirrorwatch/analytics
{{- end -}}
{{- end -}}

{{/* A flow name as a label value (the mirror's pods carry their flow's). */}}
{{- define "mirrorwatch.flowLabel" -}}
{{- regexReplaceAll "[^A-Za-z0-9._-]" . "-" | trunc 63 | trimAll "-._" -}}
{{- end -}}

{{/*
The image of a component: one image per role (docs/image.md). The page runs the page's image; the monitor runs the
analytics image when its config schedules the Spark job (monitor.analytics.every_s: the job is a child process of
the monitor), else the base image, as do the canary and the mirror.
*/}}
{{- define "mirrorwatch.image" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $image := $root.Values.image -}}
{{- $repository := $image.repository -}}
{{- if eq $component "page" -}}
{{- $repository = $image.pageRepository -}}
{{- else if and (eq $component "monitor") (dig "monitor" "analytics" "every_s" nil ($root.Values.config | default dict)) -}}
{{- $repository = $image.analyticsRepository -}}
{{- end -}}
{{- printf "%s:%s" $repository ($image.tag | default $root.Chart.AppVersion) -}}
{{- end -}}
