{{- define "dgd-rollout.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the prefix of every object the chart makes. */}}
{{- define "dgd-rollout.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "dgd-rollout.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "dgd-rollout.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "dgd-rollout.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dgd-rollout.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dgd-rollout.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dgd-rollout.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dgd-rollout.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "dgd-rollout.webhookService" -}}
{{ include "dgd-rollout.fullname" . }}-webhook-service
{{- end }}

{{- define "dgd-rollout.webhookSecret" -}}
{{ include "dgd-rollout.fullname" . }}-webhook-cert
{{- end }}

{{- define "dgd-rollout.certificate" -}}
{{ include "dgd-rollout.fullname" . }}-webhook
{{- end }}

{{/* Where the manager reads (self-signed: writes) the webhook's certificate. */}}
{{- define "dgd-rollout.certDir" -}}
/tmp/k8s-webhook-server/serving-certs
{{- end }}

{{- define "dgd-rollout.validate" -}}
{{- if not (has .Values.webhook.certMode (list "self-signed" "cert-manager")) }}
{{- fail (printf "webhook.certMode %q: want self-signed or cert-manager" .Values.webhook.certMode) }}
{{- end }}
{{- if not (has .Values.platform.discoveryBackend (list "kubernetes" "etcd")) }}
{{- fail (printf "platform.discoveryBackend %q: want kubernetes or etcd" .Values.platform.discoveryBackend) }}
{{- end }}
{{- if and (eq .Values.platform.discoveryBackend "etcd") (not .Values.platform.etcdEndpoints) }}
{{- fail "platform.discoveryBackend etcd needs platform.etcdEndpoints" }}
{{- end }}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled: two managers would act at once" }}
{{- end }}
{{- end }}
