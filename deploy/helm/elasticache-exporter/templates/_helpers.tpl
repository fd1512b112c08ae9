{{- define "ecx.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ecx.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "ecx.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "ecx.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "ecx.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ecx.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ecx.labels" -}}
{{ include "ecx.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "ecx.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ecx.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ecx.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "ecx.secretName" -}}
{{- default (printf "%s-secrets" (include "ecx.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{- define "ecx.webConfigSecretName" -}}
{{- default (printf "%s-web-config" (include "ecx.fullname" .)) .Values.webConfig.existingSecret }}
{{- end }}

{{- define "ecx.sharded" -}}
{{- if or (gt (int .Values.shards) 1) .Values.autosharding.enabled }}true{{ end }}
{{- end }}

{{- /* the shard count read from the StatefulSet's replicas (scrape.shard INDEX/auto) */}}
{{- define "ecx.autosharded" -}}
{{- if .Values.autosharding.enabled }}true{{ end }}
{{- end }}

{{- /* config.yml: the values' config, with the aws section that discovery fills (keys of config.aws win) */}}
{{- define "ecx.config" -}}
{{- $config := deepCopy .Values.config }}
{{- with .Values.discovery }}
{{- if .enabled }}
{{- $_ := required "discovery.regions is required with discovery.enabled: the regions of your ElastiCache caches, e.g. --set 'discovery.regions={eu-west-1}'" (join "," (default list .regions)) }}
{{- $discovered := dict "tls_ca_file" .tlsCaFile }}
{{- with .user }}
{{- $_ := set $discovered "user" . }}
{{- end }}
{{- with .passwordKey }}
{{- if not (or $.Values.secrets.existingSecret (hasKey $.Values.secrets.files .)) }}
{{- $_ := required (printf "secrets.files.%s is required with discovery.passwordKey %s (or secrets.existingSecret, a Secret of yours with the key %s)" . . .) nil }}
{{- end }}
{{- $_ := set $discovered "password_file" (printf "/etc/elasticache-exporter/secrets/%s" .) }}
{{- end }}
{{- $aws := dict "regions" .regions "scrape_discovered" true "discovered" $discovered }}
{{- $_ := set $config "aws" (mergeOverwrite $aws (default dict $config.aws)) }}
{{- end }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{- /* the value of the alert_source label of every alert, which the AlertmanagerConfig's route and inhibit rules match */}}
{{- define "ecx.alertSource" -}}
{{- $source := required "alerts.source: the value of the alert_source label every alert carries" .Values.alerts.source }}
{{- if not (regexMatch "^[A-Za-z0-9][A-Za-z0-9_.:/-]*$" $source) }}
{{- fail (printf "alerts.source %q: use letters, digits and _.:/-" $source) }}
{{- end }}
{{- $source }}
{{- end }}

{{- /* labels as key=value, comma-separated, for NOTES.txt */}}
{{- define "ecx.labelList" -}}
{{- $pairs := list }}
{{- range $key, $value := . }}
{{- $pairs = append $pairs (printf "%s=%v" $key $value) }}
{{- end }}
{{- join ", " $pairs }}
{{- end }}
