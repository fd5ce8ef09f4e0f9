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

{{/* Seconds the webhook answers in-flight admissions after SIGTERM (uvicorn's timeout_graceful_shutdown,
webhook/server.py GRACEFUL_SHUTDOWN_SECONDS). */}}
{{- define "ep.webhook.gracefulShutdownSeconds" -}}
10
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

{{/* The policies that bound what the resizer's ServiceAccount may write on pods and on Jobs (cluster-scoped,
one name for a policy and its binding). */}}
{{- define "ep.resizerPodsPolicyName" -}}
{{- printf "%s-resizer-pods" (include "ep.fullname" . | trunc 49 | trimSuffix "-") -}}
{{- end -}}

{{- define "ep.resizerJobsPolicyName" -}}
{{- printf "%s-resizer-jobs" (include "ep.fullname" . | trunc 49 | trimSuffix "-") -}}
{{- end -}}

{{/* The username the API server knows the resizer's ServiceAccount by. */}}
{{- define "ep.resizer.username" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "ep.resizer.serviceAccountName" .) -}}
{{- end -}}

{{/*
CEL: true when the maps at CEL paths `new` and `old` hold the same keys with equal values, but for the keys
in the CEL list `except` (which may differ, appear or disappear). Generic over the keys, so a field a later
Kubernetes version adds is held unchanged too. Call with (dict "new" "object.spec" "old" "oldObject.spec"
"except" "['nodeSelector']").
*/}}
{{- define "ep.cel.sameExcept" -}}
({{ .new }}.all(k, k in {{ .except }} || (k in {{ .old }} && {{ .new }}[k] == {{ .old }}[k])) && {{ .old }}.all(k, k in {{ .except }} || k in {{ .new }}))
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
    {{- with .Values.resizer.namespace }}
    {{- /* A resizer serving one namespace could not resize back a Job shrunk anywhere else. */}}
    - key: kubernetes.io/metadata.name
      operator: In
      values: [{{ . | quote }}]
    {{- end }}
    {{- with .Values.webhook.admission.namespaceSelectorExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* Shared namespaceSelector + objectSelector of every webhook. */}}
{{- define "ep.webhook.selectors" -}}
{{ include "ep.webhook.namespaceSelector" . }}
objectSelector: {{ toJson .Values.webhook.admission.objectSelector }}
{{- end -}}

{{/* ep.webhook.selectors with more objectSelector expressions ANDed to the user's objectSelector: call
with (dict "ctx" $ "expressions" (list <matchExpressions item>...)). The follower policy's bindings. */}}
{{- define "ep.webhook.selectorsAnd" -}}
{{- $object := deepCopy .ctx.Values.webhook.admission.objectSelector -}}
{{- $expressions := concat (get $object "matchExpressions" | default list) .expressions -}}
{{- $_ := set $object "matchExpressions" $expressions -}}
{{ include "ep.webhook.namespaceSelector" .ctx }}
objectSelector: {{ toJson $object }}
{{- end -}}

{{/* The follower shards' label values, "0" to followerShards - 1, as a JSON list of strings. */}}
{{- define "ep.followerShards" -}}
{{- $shards := list -}}
{{- range $k := until (int .Values.webhook.admission.pods.followerShards) -}}
{{- $shards = append $shards (toString $k) -}}
{{- end -}}
{{- toJson $shards -}}
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
{{- toJson (list "exclusive-placement.io/resize" "exclusive-placement.io/pin-followers") -}}
{{- end -}}

{{- define "ep.resizeAnnotations" -}}
{{- toJson (list "exclusive-placement.io/target-completions" "exclusive-placement.io/target-parallelism" "exclusive-placement.io/target-max-failed-indexes" "exclusive-placement.io/leader-domain") -}}
{{- end -}}

{{/* CEL: true when the metadata at the given CEL path carries any resize key (label or annotation). */}}
{{- define "ep.cel.hasResizeKey" -}}
((has({{ . }}.labels) && {{ include "ep.resizeLabels" . }}.exists(k, k in {{ . }}.labels)) || (has({{ . }}.annotations) && {{ include "ep.resizeAnnotations" . }}.exists(k, k in {{ . }}.annotations)))
{{- end -}}

{{/*
The keys of a Job that put it in the all-or-nothing queue (placement/reserved.py GANG_KEYS): only the Job
webhook writes them, at creation, from the owning JobSet; no one changes them afterwards. Labels first,
then annotations.
*/}}
{{- define "ep.gangLabels" -}}
{{- toJson (list "exclusive-placement.io/all-or-nothing") -}}
{{- end -}}

{{- define "ep.gangAnnotations" -}}
{{- toJson (list "exclusive-placement.io/all-or-nothing" "exclusive-placement.io/gang-size" "exclusive-placement.io/gang-queued-at") -}}
{{- end -}}

{{/* CEL: true when the metadata at the given CEL path carries any gang key (label or annotation). */}}
{{- define "ep.cel.hasGangKey" -}}
((has({{ . }}.labels) && {{ include "ep.gangLabels" . }}.exists(k, k in {{ . }}.labels)) || (has({{ . }}.annotations) && {{ include "ep.gangAnnotations" . }}.exists(k, k in {{ . }}.annotations)))
{{- end -}}

{{/*
CEL: true when none of the given keys of a Job's metadata differs between oldObject and object (added,
removed or changed); call with (dict "labels" <JSON list> "annotations" <JSON list>). Written with has()
guards only: the same constructs as every other expression of the chart.
*/}}
{{- define "ep.cel.keysUnchanged" -}}
{{- $checks := list -}}
{{- range $field := list "labels" "annotations" -}}
{{- $keys := index $ $field -}}
{{- $new := printf "object.metadata.%s" $field -}}
{{- $old := printf "oldObject.metadata.%s" $field -}}
{{- $checks = append $checks (printf "%s.all(k, (has(%s) && k in %s) == (has(%s) && k in %s) && (!(has(%s) && k in %s) || %s[k] == %s[k]))" $keys $new $new $old $old $new $new $new $old) -}}
{{- end -}}
{{- join " && " $checks -}}
{{- end -}}

{{/* CEL: true when no resize key differs between oldObject and object. */}}
{{- define "ep.cel.resizeKeysUnchanged" -}}
{{- include "ep.cel.keysUnchanged" (dict "labels" (include "ep.resizeLabels" .) "annotations" (include "ep.resizeAnnotations" .)) -}}
{{- end -}}

{{/* CEL: true when no gang key differs between oldObject and object. */}}
{{- define "ep.cel.gangKeysUnchanged" -}}
{{- include "ep.cel.keysUnchanged" (dict "labels" (include "ep.gangLabels" .) "annotations" (include "ep.gangAnnotations" .)) -}}
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

{{/* The resizer's ClusterRoles (templates/rbac.yaml): what it reads in every namespace, and its writes. */}}
{{- define "ep.resizer.readsRoleName" -}}
{{- printf "%s-reads" (include "ep.resizer.fullname" . | trunc 57 | trimSuffix "-") -}}
{{- end -}}

{{- define "ep.resizer.writesRoleName" -}}
{{- printf "%s-writes" (include "ep.resizer.fullname" . | trunc 56 | trimSuffix "-") -}}
{{- end -}}

{{- define "ep.resizer.leaderElectionRoleName" -}}
{{- printf "%s-leader-election" (include "ep.resizer.fullname" . | trunc 47 | trimSuffix "-") -}}
{{- end -}}

{{/*
How exclusive pods are admitted: "policy" (MutatingAdmissionPolicy + ValidatingAdmissionPolicy inside
kube-apiserver, the webhook only for what needs a lookup) or "webhook" (the pod webhook for every exclusive
pod). webhook.admission.pods.path "auto" picks policy exactly when the API serves
admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (Kubernetes 1.36+; `helm template` without
--api-versions renders with Helm's built-in list).
*/}}
{{/* "true" when the resizer labels resized Jobs pin-followers: on the policy path only, the label being
the follower policy's params (docs/webhook.md, "Two paths for pods"); on the webhook path no one reads it. */}}
{{- define "ep.resizer.pinFollowersLabel" -}}
{{- ternary "true" "false" (eq (include "ep.podAdmissionPath" .) "policy") -}}
{{- end -}}

{{- define "ep.podAdmissionPath" -}}
{{- $path := .Values.webhook.admission.pods.path -}}
{{- if eq $path "auto" -}}
{{- ternary "policy" "webhook" (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy") -}}
{{- else -}}
{{- $path -}}
{{- end -}}
{{- end -}}

{{/* The pod MutatingAdmissionPolicy (labels, leader terms, gates) and ValidatingAdmissionPolicy, with their bindings. */}}
{{- define "ep.podPolicyName" -}}
{{- printf "%s-pods" (include "ep.fullname" . | trunc 58 | trimSuffix "-") -}}
{{- end -}}

{{/* The follower MutatingAdmissionPolicy and its binding (params: the resized Jobs of the pod's namespace). */}}
{{- define "ep.followerPolicyName" -}}
{{- printf "%s-pod-followers" (include "ep.fullname" . | trunc 48 | trimSuffix "-") -}}
{{- end -}}

{{/* CEL over a pod (`object`): its topology key (ours wins over JobSet's; blank counts as unset), '' when none. */}}
{{- define "ep.cel.podTopologyKey" -}}
(object.metadata.?annotations[?'exclusive-placement.io/topology'].orValue('').trim() != '' ? object.metadata.annotations['exclusive-placement.io/topology'].trim() : object.metadata.?annotations[?'alpha.jobset.sigs.k8s.io/exclusive-topology'].orValue('').trim())
{{- end -}}

{{/* CEL over a pod: its strategy annotation (trimmed), else the chart's default strategy. */}}
{{- define "ep.cel.podStrategy" -}}
(object.metadata.?annotations[?'exclusive-placement.io/strategy'].orValue('').trim() != '' ? object.metadata.annotations['exclusive-placement.io/strategy'].trim() : '{{ .Values.placement.defaultStrategy }}')
{{- end -}}

{{/* CEL over a pod: its completion index (annotation, else label), '' for a pod of a NonIndexed Job. */}}
{{- define "ep.cel.podCompletionIndex" -}}
object.metadata.?annotations[?'batch.kubernetes.io/job-completion-index'].orValue(object.metadata.?labels[?'batch.kubernetes.io/job-completion-index'].orValue('')).trim()
{{- end -}}

{{/* CEL over a pod: its controller ownerReferences of kind batch/v1 Job (the Job controller sets exactly one). */}}
{{- define "ep.cel.podJobOwners" -}}
object.metadata.?ownerReferences.orValue([]).filter(r, r.apiVersion == 'batch/v1' && r.kind == 'Job' && r.?controller.orValue(false))
{{- end -}}

{{/*
CEL over a pod: admitted by the policies on the policy path (the pod webhook takes the others): an exclusive
pod (a topology key, not JobSet's node-selector mode) whose controller is a batch/v1 Job, of strategy
elastic or affinity, or of a NonIndexed Job (placed as affinity whatever its strategy). `gate` needs the
leader looked up, scheduling-gate pins at creation when the leader is already bound (docs/webhook.md), a
pod without a Job gets its answer (a warning, or a denial) and an unknown strategy its message from the
webhook. The pods of all-or-nothing Jobs stay on the webhook too (docs/webhook.md, "Two paths for pods").
Only pods the Job controller creates (`webhook.admission.pods.jobControllerUsernames`): their controller
ownerReference is its own Job's, in their namespace, so its uid is a job key nobody else can claim; a pod
created directly with a Job's ownerReference goes to the webhook, whose key hashes the namespace too.
*/}}
{{- define "ep.cel.podAdmittedByPolicy" -}}
(request.userInfo.username in {{ toJson .Values.webhook.admission.pods.jobControllerUsernames | replace "\"" "'" }} && {{ include "ep.cel.podTopologyKey" . }} != '' && !{{ include "ep.cel.inNodeSelectorMode" "object.metadata" }} && !(has(object.metadata.annotations) && 'exclusive-placement.io/all-or-nothing' in object.metadata.annotations) && size({{ include "ep.cel.podJobOwners" . }}) == 1 && ({{ include "ep.cel.podStrategy" . }} in ['elastic', 'affinity'] || ({{ include "ep.cel.podCompletionIndex" . }} == '' && {{ include "ep.cel.podStrategy" . }} in ['gate', 'scheduling-gate'])))
{{- end -}}
