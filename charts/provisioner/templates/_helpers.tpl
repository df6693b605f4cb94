{{- define "provisioner.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "provisioner.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "provisioner.labels" -}}
app.kubernetes.io/name: {{ include "provisioner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "provisioner.selectorLabels" -}}
app.kubernetes.io/name: {{ include "provisioner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "provisioner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "provisioner.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "provisioner.clusterName" -}}
{{- required "clusterName is required: the value that tags instances as this cluster's" .Values.clusterName -}}
{{- end -}}

{{- /*
The provider plug-ins the chart knows: providers/NAME.yaml, one per plug-in, generated from its declaration
by `provisioner chart --write charts/provisioner`. As JSON {"items": [...]} in name order; read with
(include "provisioner.plugins" . | fromJson).items.
*/ -}}
{{- define "provisioner.plugins" -}}
{{- $items := list -}}
{{- range $path, $_ := .Files.Glob "providers/*.yaml" -}}
{{- $items = append $items ($.Files.Get $path | fromYaml) -}}
{{- end -}}
{{- dict "items" $items | toJson -}}
{{- end -}}

