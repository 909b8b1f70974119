{{- define "webapp.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "webapp.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "webapp.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* As bitnami's common.tplvalues.render: a value rendered as a template, string or not. */}}
{{- define "webapp.tplvalues.render" -}}
{{- if typeIs "string" .value -}}
{{- tpl .value .context -}}
{{- else -}}
{{- tpl (.value | toYaml) .context -}}
{{- end -}}
{{- end -}}

{{- define "webapp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "webapp.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "webapp.secretName" -}}
{{- default (include "webapp.fullname" .) .Values.existingSecret -}}
{{- end -}}

{{/* As bitnami's common.compatibility.renderSecurityContext: the context without "enabled". */}}
{{- define "webapp.securityContext" -}}
{{- omit . "enabled" | toYaml -}}
{{- end -}}
