{{/*
Names. The chart name can be overridden with nameOverride; the name of every object with
fullnameOverride, else it is "<release>-<chart>" (just "<release>" when that already contains
the chart name), cut to the 63 characters of a DNS label.
*/}}
{{- define "kcp-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kcp-operator.fullname" -}}
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

{{/* "<chart>-<version>" for the helm.sh/chart label ("+" is not allowed in label values). */}}
{{- define "kcp-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the operator's pods; they must never change between upgrades. */}}
{{- define "kcp-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kcp-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels on every object of the chart. */}}
{{- define "kcp-operator.labels" -}}
helm.sh/chart: {{ include "kcp-operator.chart" . }}
{{ include "kcp-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The ServiceAccount the operator runs as: created by the chart, or brought by the user. */}}
{{- define "kcp-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kcp-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The operator image. Images are tagged "v<version>" (like the kcp image the operator deploys by
default), so without image.tag the tag is "v" + the chart's appVersion.
*/}}
{{- define "kcp-operator.image" -}}
{{- $tag := .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
