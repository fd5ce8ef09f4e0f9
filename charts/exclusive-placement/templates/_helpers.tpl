{{/* Every derived name lives here; names are DNS labels, so truncate to 63 characters. */}}

{{- define "ep.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ep.fullname" -}}
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

{{/* Component names: "<fullname>-webhook", "<fullname>-resizer" (fullname shortened so the suffix survives). */}}
{{- define "ep.webhook.fullname" -}}
{{- printf "%s-webhook" (include "ep.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "ep.resizer.fullname" -}}
{{- printf "%s-resizer" (include "ep.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "ep.webhook.serviceName" -}}
{{- include "ep.webhook.fullname" . -}}
{{- end -}}

{{- define "ep.resizer.metricsServiceName" -}}
{{- printf "%s-metrics" (include "ep.resizer.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "ep.resizer.leaseName" -}}
{{- default (include "ep.resizer.fullname" .) .Values.resizer.leaseName -}}
{{- end -}}

{{- define "ep.certs.secretName" -}}
{{- default (printf "%s-tls" (include "ep.webhook.fullname" . | trunc 59 | trimSuffix "-")) .Values.certs.secretName -}}
{{- end -}}

{{- define "ep.certs.certificateName" -}}
{{- include "ep.webhook.fullname" . -}}
{{- end -}}

{{- define "ep.certs.issuerName" -}}
{{- printf "%s-selfsigned" (include "ep.fullname" . | trunc 52 | trimSuffix "-") -}}
{{- end -}}

{{/* Webhook configuration names are cluster-scoped: include the namespace-free release fullname. */}}
{{- define "ep.mutatingWebhookConfigurationName" -}}
{{- include "ep.fullname" . -}}
{{- end -}}

{{- define "ep.validatingWebhookConfigurationName" -}}
{{- include "ep.fullname" . -}}
{{- end -}}

{{/* The job-key ValidatingAdmissionPolicy and its binding (cluster-scoped, one name for both kinds). */}}
{{- define "ep.jobKeyPolicyName" -}}
{{- printf "%s-job-key" (include "ep.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{/* The resize-keys ValidatingAdmissionPolicy and its binding (cluster-scoped, one name for both kinds). */}}
{{- define "ep.resizeKeysPolicyName" -}}
{{- printf "%s-resize-keys" (include "ep.fullname" . | trunc 51 | trimSuffix "-") -}}
{{- end -}}

{{- define "ep.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ep.labels" -}}
helm.sh/chart: {{ include "ep.chart" . }}
app.kubernetes.io/name: {{ include "ep.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: exclusive-placement
{{- end -}}

{{/* Selector labels of one component; call with (dict "ctx" $ "component" "webhook"). */}}
{{- define "ep.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ep.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ep.componentLabels" -}}
{{ include "ep.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ep.webhook.serviceAccountName" -}}
{{- include "ep.webhook.fullname" . -}}
{{- end -}}

{{- define "ep.resizer.serviceAccountName" -}}
{{- include "ep.resizer.fullname" . -}}
{{- end -}}

{{/* "<registry>/<repository>:<tag>", the tag defaulting to the chart's appVersion; call with (dict "ctx" $ "repository" ...). */}}
{{- define "ep.image" -}}
{{- $registry := .ctx.Values.image.registry | trimSuffix "/" -}}
{{- $tag := default .ctx.Chart.AppVersion .ctx.Values.image.tag -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" $registry .repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Namespaces the webhooks never see: the release namespace, kube-system, and the user's list. */}}
{{- define "ep.webhook.exemptNamespaces" -}}
{{- $exempt := list .Release.Namespace "kube-system" -}}
{{- range .Values.webhook.admission.exemptNamespaces -}}
{{- $exempt = append $exempt . -}}
{{- end -}}
{{- toJson (uniq $exempt) -}}
{{- end -}}

{{/* The namespaceSelector of every webhook and of the job-key policy binding: exemptions ANDed with the user's expressions. */}}
{{- define "ep.webhook.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ include "ep.webhook.exemptNamespaces" . }}
    {{- with .Values.webhook.admission.namespaceSelectorExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* Shared namespaceSelector + objectSelector of every webhook. */}}
{{- define "ep.webhook.selectors" -}}
{{ include "ep.webhook.namespaceSelector" . }}
objectSelector: {{ toJson .Values.webhook.admission.objectSelector }}
{{- end -}}

{{/*
CEL: true when an object's annotations carry a topology key (ours or JobSet's): exactly the objects the
webhook acts on (placement/objects.py). Call with the CEL path of the metadata, e.g. "object.metadata".
*/}}
{{- define "ep.cel.hasTopologyAnnotation" -}}
(has({{ . }}.annotations) && ('exclusive-placement.io/topology' in {{ . }}.annotations || 'alpha.jobset.sigs.k8s.io/exclusive-topology' in {{ . }}.annotations))
{{- end -}}

{{/*
CEL: true when the metadata at the given CEL path carries an annotation of this project (any
exclusive-placement.io/ key) or JobSet's exclusive-topology: the JobSets the JobSet validation reads
(placement/jobset_validation.py). Call with the CEL path of the metadata, e.g. "object.metadata".
*/}}
{{- define "ep.cel.hasProjectAnnotation" -}}
(has({{ . }}.annotations) && {{ . }}.annotations.exists(k, k.startsWith('exclusive-placement.io/') || k == 'alpha.jobset.sigs.k8s.io/exclusive-topology'))
{{- end -}}

{{/* CEL: true when a JobSet (at the given CEL path) or one of its replicated Jobs' templates carries this
project's annotations; every optional level is tested with has() so that no JobSet makes it an error. */}}
{{- define "ep.cel.jobsetHasProjectAnnotation" -}}
{{ include "ep.cel.hasProjectAnnotation" (printf "%s.metadata" .) }} || (has({{ . }}.spec) && has({{ . }}.spec.replicatedJobs) && {{ . }}.spec.replicatedJobs.exists(rj, has(rj.template) && ((has(rj.template.metadata) && {{ include "ep.cel.hasProjectAnnotation" "rj.template.metadata" }}) || (has(rj.template.spec) && has(rj.template.spec.template) && has(rj.template.spec.template.metadata) && {{ include "ep.cel.hasProjectAnnotation" "rj.template.spec.template.metadata" }}))))
{{- end -}}

{{/* CEL: true when the metadata at the given CEL path carries JobSet's node-selector mode annotation (pools
pre-labelled by the user: JobSet and this project leave such objects to their own nodeSelector). */}}
{{- define "ep.cel.inNodeSelectorMode" -}}
(has({{ . }}.annotations) && 'alpha.jobset.sigs.k8s.io/node-selector' in {{ . }}.annotations)
{{- end -}}

{{/*
The keys of a Job that only this project writes (placement/reserved.py RESIZE_KEYS): the Job webhook at
creation, the resizer afterwards. Labels first, then annotations.
*/}}
{{- define "ep.resizeLabels" -}}
{{- toJson (list "exclusive-placement.io/resize") -}}
{{- end -}}

{{- define "ep.resizeAnnotations" -}}
{{- toJson (list "exclusive-placement.io/target-completions" "exclusive-placement.io/target-parallelism" "exclusive-placement.io/target-max-failed-indexes") -}}
{{- end -}}

{{/* CEL: true when the metadata at the given CEL path carries any resize key (label or annotation). */}}
{{- define "ep.cel.hasResizeKey" -}}
((has({{ . }}.labels) && {{ include "ep.resizeLabels" . }}.exists(k, k in {{ . }}.labels)) || (has({{ . }}.annotations) && {{ include "ep.resizeAnnotations" . }}.exists(k, k in {{ . }}.annotations)))
{{- end -}}

{{/*
CEL: true when no resize key differs between oldObject and object (added, removed or changed). Written
with has() guards only: the same constructs as every other expression of the chart.
*/}}
{{- define "ep.cel.resizeKeysUnchanged" -}}
{{- $checks := list -}}
{{- range $field := list "labels" "annotations" -}}
{{- $keys := ternary (include "ep.resizeLabels" $) (include "ep.resizeAnnotations" $) (eq $field "labels") -}}
{{- $new := printf "object.metadata.%s" $field -}}
{{- $old := printf "oldObject.metadata.%s" $field -}}
{{- $checks = append $checks (printf "%s.all(k, (has(%s) && k in %s) == (has(%s) && k in %s) && (!(has(%s) && k in %s) || %s[k] == %s[k]))" $keys $new $new $old $old $new $new $new $old) -}}
{{- end -}}
{{- join " && " $checks -}}
{{- end -}}

{{/* CEL: true when the metadata at the given CEL path carries the exclusive-placement.io/job-key label. */}}
{{- define "ep.cel.hasJobKeyLabel" -}}
(has({{ . }}.labels) && 'exclusive-placement.io/job-key' in {{ . }}.labels)
{{- end -}}

{{/*
The clientConfig of one webhook path; call with (dict "ctx" $ "path" "/mutate-pods" "caBundle" $caBundle).
An empty caBundle is left out (cert-manager's CA injector fills it in).
*/}}
{{- define "ep.webhook.clientConfig" -}}
clientConfig:
  service:
    name: {{ include "ep.webhook.serviceName" .ctx }}
    namespace: {{ .ctx.Release.Namespace }}
    path: {{ .path }}
    port: 443
  {{- with .caBundle }}
  caBundle: {{ . }}
  {{- end }}
{{- end -}}

{{/* Annotations of the webhook configurations (cert-manager injects caBundle from the Certificate). */}}
{{- define "ep.webhook.configAnnotations" -}}
{{- if eq .Values.certs.mode "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "ep.certs.certificateName" .) }}
{{- end -}}
{{- end -}}

{{/* Pod Security "restricted": pod-level securityContext. */}}
{{- define "ep.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Pod Security "restricted": container-level securityContext. */}}
{{- define "ep.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Spread one component's pods across nodes; call with (dict "ctx" $ "component" "webhook" "mode" "soft"). */}}
{{- define "ep.antiAffinity" -}}
podAntiAffinity:
  {{- if eq .mode "hard" }}
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "ep.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 10 }}
  {{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "ep.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 12 }}
  {{- end }}
{{- end -}}

{{- define "ep.webhook.certDir" -}}
/etc/exclusive-placement/certs
{{- end -}}

{{- define "ep.webhook.clientCADir" -}}
/etc/exclusive-placement/client-ca
{{- end -}}

{{- define "ep.resizer.leaderElectionRoleName" -}}
{{- printf "%s-leader-election" (include "ep.resizer.fullname" . | trunc 47 | trimSuffix "-") -}}
{{- end -}}
