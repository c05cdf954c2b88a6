{{/* The DRA driver name (docs/architecture.md); fixed, it names the plugin's socket directory. */}}
{{- define "vgpu-dra.driverName" -}}vgpu.dra.dev{{- end -}}

{{- define "vgpu-dra.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vgpu-dra.fullname" -}}
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

{{- define "vgpu-dra.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "vgpu-dra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "vgpu-dra.pluginName" -}}
{{- printf "%s-kubelet-plugin" (include "vgpu-dra.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vgpu-dra.pluginSelectorLabels" -}}
app.kubernetes.io/name: {{ include "vgpu-dra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: kubelet-plugin
{{- end -}}

{{- define "vgpu-dra.mpsHostName" -}}
{{- printf "%s-mps-host" (include "vgpu-dra.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vgpu-dra.mpsHostSelectorLabels" -}}
app.kubernetes.io/name: {{ include "vgpu-dra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: mps-host
{{- end -}}

{{- define "vgpu-dra.pluginServiceAccount" -}}
{{- default (include "vgpu-dra.pluginName" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "vgpu-dra.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Host paths derived from paths.kubeletDir, as the kubelet lays them out. */}}
{{- define "vgpu-dra.registrarDir" -}}
{{- printf "%s/plugins_registry" (trimSuffix "/" .Values.paths.kubeletDir) -}}
{{- end -}}
{{- define "vgpu-dra.pluginDataDir" -}}
{{- printf "%s/plugins/%s" (trimSuffix "/" .Values.paths.kubeletDir) (include "vgpu-dra.driverName" .) -}}
{{- end -}}
{{/*
The mps-host pod's socket, in the state root (docs/mps.md).
*/}}
{{- define "vgpu-dra.mpsHostSocket" -}}
{{- printf "%s/mps/host.sock" (trimSuffix "/" .Values.paths.stateRoot) -}}
{{- end -}}

{{- define "vgpu-dra.libvgpuPath" -}}
{{- printf "%s/libvgpu.so" (trimSuffix "/" .Values.paths.libvgpuDir) -}}
{{- end -}}

{{/*
Checks of value combinations that the schema cannot express; each failure
names the value to change.
*/}}
{{- define "vgpu-dra.validate" -}}
{{- if semverCompare "<1.35.0-0" .Capabilities.KubeVersion.Version -}}
{{- fail (printf "Kubernetes %s is older than this chart supports: it needs 1.35 with the DRA feature gates on, or 1.36 and later; the table of versions and gates is in docs/install.md, section Kubernetes versions" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- if and .Values.controller.enabled (eq (int .Values.controller.webhook.port) (int .Values.controller.metricsPort)) -}}
{{- fail (printf "controller.metricsPort: %v is also controller.webhook.port; the two servers need different ports" .Values.controller.metricsPort) -}}
{{- end -}}
{{- $ru := .Values.kubeletPlugin.updateStrategy.rollingUpdate | default dict -}}
{{- if and .Values.kubeletPlugin.hostNetwork (eq .Values.kubeletPlugin.updateStrategy.type "RollingUpdate") (ne (toString (default 0 $ru.maxSurge)) "0") -}}
{{- fail (printf "kubeletPlugin.updateStrategy.rollingUpdate.maxSurge: with kubeletPlugin.hostNetwork two plugin pods on one node would both bind port %v; set maxSurge to 0 and maxUnavailable to 1, or turn hostNetwork off" .Values.metrics.port) -}}
{{- end -}}
{{- range $k, $p := dict "paths.kubeletDir" .Values.paths.kubeletDir "paths.cdiRoot" .Values.paths.cdiRoot "paths.stateRoot" .Values.paths.stateRoot "paths.libvgpuDir" .Values.paths.libvgpuDir "gpu.driverRoot" .Values.gpu.driverRoot -}}
{{- if not (isAbs $p) -}}
{{- fail (printf "%s: %q must be an absolute path" $k $p) -}}
{{- end -}}
{{- end -}}
{{- if or (isAbs .Values.gpu.nvmlLibrary) (has ".." (splitList "/" .Values.gpu.nvmlLibrary)) -}}
{{- fail (printf "gpu.nvmlLibrary: %q must be a path relative to gpu.driverRoot without \"..\"" .Values.gpu.nvmlLibrary) -}}
{{- end -}}
{{- end -}}

{{/* Probe timeout: the plugin's own /healthz time limit plus a margin. */}}
{{- define "vgpu-dra.probeTimeout" -}}
{{- add 5 (regexReplaceAll "s$" .Values.kubeletPlugin.healthzTimeout "" | int) -}}
{{- end -}}

{{- define "vgpu-dra.controllerName" -}}
{{- printf "%s-controller" (include "vgpu-dra.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vgpu-dra.controllerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "vgpu-dra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "vgpu-dra.controllerServiceAccount" -}}
{{- default (include "vgpu-dra.controllerName" .) .Values.controller.serviceAccount.name -}}
{{- end -}}

{{/*
The Secret holding the webhook's serving certificate: written by the chart
(self-signed) or by cert-manager. The names differ so that switching between
the two never makes Helm adopt a Secret another owner manages.
*/}}
{{- define "vgpu-dra.controllerTLSSecret" -}}
{{- if .Values.controller.webhook.certManager.enabled -}}
{{- printf "%s-cert" (include "vgpu-dra.controllerName" .) -}}
{{- else -}}
{{- printf "%s-tls" (include "vgpu-dra.controllerName" .) -}}
{{- end -}}
{{- end -}}

{{/* The DNS names the API server uses to reach the webhook Service. */}}
{{- define "vgpu-dra.controllerDNSNames" -}}
{{- $svc := include "vgpu-dra.controllerName" . -}}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) | join "," -}}
{{- end -}}

{{/* Environment that points client-go at apiServer.host instead of the in-cluster Service. */}}
{{- define "vgpu-dra.apiServerEnv" -}}
{{- with .Values.apiServer.host -}}
- name: KUBERNETES_SERVICE_HOST
  value: {{ . | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ $.Values.apiServer.port | quote }}
{{- end -}}
{{- end -}}

{{/*
controller.policyAllocation.mode as the controller's flag takes it. YAML 1.1
reads an unquoted `mode: off` in a values file as false; that means "off".
*/}}
{{- define "vgpu-dra.policyAllocationMode" -}}
{{- $mode := .Values.controller.policyAllocation.mode -}}
{{- if eq (toString $mode) "false" -}}off{{- else -}}{{ $mode }}{{- end -}}
{{- end -}}
