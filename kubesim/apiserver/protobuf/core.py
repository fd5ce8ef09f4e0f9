"""core/v1 messages: Namespace, ConfigMap, Secret, ServiceAccount, Service, and the pod template the
workload kinds embed.

Field numbers: kubernetes/api `core/v1/generated.proto`; presence: the Go structs' json tags in
`core/v1/types.go`. Declared are every field kubectl's `create` subcommands set, every field Go always
writes, and the pod-template fields kubesim's scheduler and Job controller read (resources, node selector,
affinity, tolerations, topology spread, scheduling gates, priority), and the security contexts (the API
server defaults a pod's to `{}`, so every stored template carries one). Not declared, so refused when sent
as protobuf (each message's `not_decoded`): pod `volumes`, `ephemeralContainers`, `hostAliases`,
`dnsConfig`, `readinessGates`, `os`, `resourceClaims`; container `volumeMounts`, `volumeDevices`, probes,
`lifecycle`.
"""

from __future__ import annotations

from kubesim.apiserver.protobuf.meta import (
    CONDITION,
    INT_OR_STRING,
    LABEL_SELECTOR,
    OBJECT_META,
    QUANTITY,
    TIME,
)
from kubesim.apiserver.protobuf.schema import (
    BOOL,
    BYTES,
    INT32,
    INT64,
    STRING,
    Presence,
    field,
    mapping,
    message,
    repeated,
)

CORE = "k8s.io.api.core.v1"

NAMESPACE = f"{CORE}.Namespace"
NAMESPACE_SPEC = f"{CORE}.NamespaceSpec"
NAMESPACE_STATUS = f"{CORE}.NamespaceStatus"
NAMESPACE_CONDITION = f"{CORE}.NamespaceCondition"
CONFIG_MAP = f"{CORE}.ConfigMap"
SECRET = f"{CORE}.Secret"
SERVICE_ACCOUNT = f"{CORE}.ServiceAccount"
OBJECT_REFERENCE = f"{CORE}.ObjectReference"
LOCAL_OBJECT_REFERENCE = f"{CORE}.LocalObjectReference"
SERVICE = f"{CORE}.Service"
SERVICE_SPEC = f"{CORE}.ServiceSpec"
SERVICE_PORT = f"{CORE}.ServicePort"
SERVICE_STATUS = f"{CORE}.ServiceStatus"
LOAD_BALANCER_STATUS = f"{CORE}.LoadBalancerStatus"
LOAD_BALANCER_INGRESS = f"{CORE}.LoadBalancerIngress"
PORT_STATUS = f"{CORE}.PortStatus"
SESSION_AFFINITY_CONFIG = f"{CORE}.SessionAffinityConfig"
CLIENT_IP_CONFIG = f"{CORE}.ClientIPConfig"
POD_TEMPLATE_SPEC = f"{CORE}.PodTemplateSpec"
POD_SPEC = f"{CORE}.PodSpec"
CONTAINER = f"{CORE}.Container"
CONTAINER_PORT = f"{CORE}.ContainerPort"
CONTAINER_RESIZE_POLICY = f"{CORE}.ContainerResizePolicy"
ENV_VAR = f"{CORE}.EnvVar"
ENV_VAR_SOURCE = f"{CORE}.EnvVarSource"
ENV_FROM_SOURCE = f"{CORE}.EnvFromSource"
CONFIG_MAP_ENV_SOURCE = f"{CORE}.ConfigMapEnvSource"
SECRET_ENV_SOURCE = f"{CORE}.SecretEnvSource"
OBJECT_FIELD_SELECTOR = f"{CORE}.ObjectFieldSelector"
RESOURCE_FIELD_SELECTOR = f"{CORE}.ResourceFieldSelector"
CONFIG_MAP_KEY_SELECTOR = f"{CORE}.ConfigMapKeySelector"
SECRET_KEY_SELECTOR = f"{CORE}.SecretKeySelector"
RESOURCE_REQUIREMENTS = f"{CORE}.ResourceRequirements"
RESOURCE_CLAIM = f"{CORE}.ResourceClaim"
TOLERATION = f"{CORE}.Toleration"
POD_SCHEDULING_GATE = f"{CORE}.PodSchedulingGate"
TOPOLOGY_SPREAD_CONSTRAINT = f"{CORE}.TopologySpreadConstraint"
AFFINITY = f"{CORE}.Affinity"
NODE_AFFINITY = f"{CORE}.NodeAffinity"
NODE_SELECTOR = f"{CORE}.NodeSelector"
NODE_SELECTOR_TERM = f"{CORE}.NodeSelectorTerm"
NODE_SELECTOR_REQUIREMENT = f"{CORE}.NodeSelectorRequirement"
PREFERRED_SCHEDULING_TERM = f"{CORE}.PreferredSchedulingTerm"
POD_AFFINITY = f"{CORE}.PodAffinity"
POD_ANTI_AFFINITY = f"{CORE}.PodAntiAffinity"
POD_AFFINITY_TERM = f"{CORE}.PodAffinityTerm"
WEIGHTED_POD_AFFINITY_TERM = f"{CORE}.WeightedPodAffinityTerm"
POD_SECURITY_CONTEXT = f"{CORE}.PodSecurityContext"
SECURITY_CONTEXT = f"{CORE}.SecurityContext"
SE_LINUX_OPTIONS = f"{CORE}.SELinuxOptions"
WINDOWS_SECURITY_CONTEXT_OPTIONS = f"{CORE}.WindowsSecurityContextOptions"
SECCOMP_PROFILE = f"{CORE}.SeccompProfile"
APP_ARMOR_PROFILE = f"{CORE}.AppArmorProfile"
SYSCTL = f"{CORE}.Sysctl"
CAPABILITIES = f"{CORE}.Capabilities"

OPTIONAL, ALWAYS, NULLABLE, INLINE = Presence.OPTIONAL, Presence.ALWAYS, Presence.NULLABLE, Presence.INLINE

_OBJECTS = (
    message(
        CORE,
        "Namespace",
        field("metadata", 1, OBJECT_META),
        field("spec", 2, NAMESPACE_SPEC),
        field("status", 3, NAMESPACE_STATUS),
    ),
    message(CORE, "NamespaceSpec", repeated("finalizers", 1, STRING)),
    message(
        CORE,
        "NamespaceStatus",
        field("phase", 1, STRING),
        repeated("conditions", 2, NAMESPACE_CONDITION),
    ),
    message(
        CORE,
        "NamespaceCondition",
        field("type", 1, STRING, ALWAYS),
        field("status", 2, STRING, ALWAYS),
        field("lastTransitionTime", 4, TIME),
        field("reason", 5, STRING),
        field("message", 6, STRING),
    ),
    message(
        CORE,
        "ConfigMap",
        field("metadata", 1, OBJECT_META),
        mapping("data", 2, STRING),
        mapping("binaryData", 3, BYTES),
        field("immutable", 4, BOOL, OPTIONAL),
    ),
    message(
        CORE,
        "Secret",
        field("metadata", 1, OBJECT_META),
        mapping("data", 2, BYTES),
        field("type", 3, STRING),
        mapping("stringData", 4, STRING),
        field("immutable", 5, BOOL, OPTIONAL),
    ),
    message(
        CORE,
        "ServiceAccount",
        field("metadata", 1, OBJECT_META),
        repeated("secrets", 2, OBJECT_REFERENCE),
        repeated("imagePullSecrets", 3, LOCAL_OBJECT_REFERENCE),
        field("automountServiceAccountToken", 4, BOOL, OPTIONAL),
    ),
    message(
        CORE,
        "ObjectReference",
        field("kind", 1, STRING),
        field("namespace", 2, STRING),
        field("name", 3, STRING),
        field("uid", 4, STRING),
        field("apiVersion", 5, STRING),
        field("resourceVersion", 6, STRING),
        field("fieldPath", 7, STRING),
    ),
    message(CORE, "LocalObjectReference", field("name", 1, STRING)),
)

_SERVICE = (
    message(
        CORE,
        "Service",
        field("metadata", 1, OBJECT_META),
        field("spec", 2, SERVICE_SPEC),
        field("status", 3, SERVICE_STATUS),
    ),
    message(
        CORE,
        "ServiceSpec",
        repeated("ports", 1, SERVICE_PORT),
        mapping("selector", 2, STRING),
        field("clusterIP", 3, STRING),
        field("type", 4, STRING),
        repeated("externalIPs", 5, STRING),
        field("sessionAffinity", 7, STRING),
        field("loadBalancerIP", 8, STRING),
        repeated("loadBalancerSourceRanges", 9, STRING),
        field("externalName", 10, STRING),
        field("externalTrafficPolicy", 11, STRING),
        field("healthCheckNodePort", 12, INT32),
        field("publishNotReadyAddresses", 13, BOOL),
        field("sessionAffinityConfig", 14, SESSION_AFFINITY_CONFIG, OPTIONAL),
        field("ipFamilyPolicy", 17, STRING, OPTIONAL),
        repeated("clusterIPs", 18, STRING),
        repeated("ipFamilies", 19, STRING),
        field("allocateLoadBalancerNodePorts", 20, BOOL, OPTIONAL),
        field("loadBalancerClass", 21, STRING, OPTIONAL),
        field("internalTrafficPolicy", 22, STRING, OPTIONAL),
        field("trafficDistribution", 23, STRING, OPTIONAL),
    ),
    message(
        CORE,
        "ServicePort",
        field("name", 1, STRING),
        field("protocol", 2, STRING),
        field("port", 3, INT32, ALWAYS),
        field("targetPort", 4, INT_OR_STRING),
        field("nodePort", 5, INT32),
        field("appProtocol", 6, STRING, OPTIONAL),
    ),
    message(
        CORE,
        "ServiceStatus",
        field("loadBalancer", 1, LOAD_BALANCER_STATUS),
        repeated("conditions", 2, CONDITION),
    ),
    message(CORE, "LoadBalancerStatus", repeated("ingress", 1, LOAD_BALANCER_INGRESS)),
    message(
        CORE,
        "LoadBalancerIngress",
        field("ip", 1, STRING),
        field("hostname", 2, STRING),
        field("ipMode", 3, STRING, OPTIONAL),
        repeated("ports", 4, PORT_STATUS),
    ),
    message(
        CORE,
        "PortStatus",
        field("port", 1, INT32, ALWAYS),
        field("protocol", 2, STRING, ALWAYS),
        field("error", 3, STRING, OPTIONAL),
    ),
    message(CORE, "SessionAffinityConfig", field("clientIP", 1, CLIENT_IP_CONFIG, OPTIONAL)),
    message(CORE, "ClientIPConfig", field("timeoutSeconds", 1, INT32, OPTIONAL)),
)

_POD_TEMPLATE = (
    message(CORE, "PodTemplateSpec", field("metadata", 1, OBJECT_META), field("spec", 2, POD_SPEC)),
    message(
        CORE,
        "PodSpec",
        repeated("containers", 2, CONTAINER, NULLABLE),
        field("restartPolicy", 3, STRING),
        field("terminationGracePeriodSeconds", 4, INT64, OPTIONAL),
        field("activeDeadlineSeconds", 5, INT64, OPTIONAL),
        field("dnsPolicy", 6, STRING),
        mapping("nodeSelector", 7, STRING),
        field("serviceAccountName", 8, STRING),
        field("serviceAccount", 9, STRING),
        field("nodeName", 10, STRING),
        field("hostNetwork", 11, BOOL),
        field("hostPID", 12, BOOL),
        field("hostIPC", 13, BOOL),
        field("securityContext", 14, POD_SECURITY_CONTEXT, OPTIONAL),
        repeated("imagePullSecrets", 15, LOCAL_OBJECT_REFERENCE),
        field("hostname", 16, STRING),
        field("subdomain", 17, STRING),
        field("affinity", 18, AFFINITY, OPTIONAL),
        field("schedulerName", 19, STRING),
        repeated("initContainers", 20, CONTAINER),
        field("automountServiceAccountToken", 21, BOOL, OPTIONAL),
        repeated("tolerations", 22, TOLERATION),
        field("priorityClassName", 24, STRING),
        field("priority", 25, INT32, OPTIONAL),
        field("shareProcessNamespace", 27, BOOL, OPTIONAL),
        field("runtimeClassName", 29, STRING, OPTIONAL),
        field("enableServiceLinks", 30, BOOL, OPTIONAL),
        field("preemptionPolicy", 31, STRING, OPTIONAL),
        mapping("overhead", 32, QUANTITY),
        repeated("topologySpreadConstraints", 33, TOPOLOGY_SPREAD_CONSTRAINT),
        field("setHostnameAsFQDN", 35, BOOL, OPTIONAL),
        field("hostUsers", 37, BOOL, OPTIONAL),
        repeated("schedulingGates", 38, POD_SCHEDULING_GATE),
        field("resources", 40, RESOURCE_REQUIREMENTS, OPTIONAL),
        not_decoded={
            1: "volumes",
            23: "hostAliases",
            26: "dnsConfig",
            28: "readinessGates",
            34: "ephemeralContainers",
            36: "os",
            39: "resourceClaims",
        },
    ),
    message(
        CORE,
        "Container",
        field("name", 1, STRING, ALWAYS),
        field("image", 2, STRING),
        repeated("command", 3, STRING),
        repeated("args", 4, STRING),
        field("workingDir", 5, STRING),
        repeated("ports", 6, CONTAINER_PORT),
        repeated("env", 7, ENV_VAR),
        field("resources", 8, RESOURCE_REQUIREMENTS),
        field("terminationMessagePath", 13, STRING),
        field("imagePullPolicy", 14, STRING),
        field("securityContext", 15, SECURITY_CONTEXT, OPTIONAL),
        field("stdin", 16, BOOL),
        field("stdinOnce", 17, BOOL),
        field("tty", 18, BOOL),
        repeated("envFrom", 19, ENV_FROM_SOURCE),
        field("terminationMessagePolicy", 20, STRING),
        repeated("resizePolicy", 23, CONTAINER_RESIZE_POLICY),
        field("restartPolicy", 24, STRING, OPTIONAL),
        not_decoded={
            9: "volumeMounts",
            10: "livenessProbe",
            11: "readinessProbe",
            12: "lifecycle",
            21: "volumeDevices",
            22: "startupProbe",
        },
    ),
    message(
        CORE,
        "ContainerPort",
        field("name", 1, STRING),
        field("hostPort", 2, INT32),
        field("containerPort", 3, INT32, ALWAYS),
        field("protocol", 4, STRING),
        field("hostIP", 5, STRING),
    ),
    message(
        CORE,
        "ContainerResizePolicy",
        field("resourceName", 1, STRING, ALWAYS),
        field("restartPolicy", 2, STRING, ALWAYS),
    ),
    message(
        CORE,
        "EnvVar",
        field("name", 1, STRING, ALWAYS),
        field("value", 2, STRING),
        field("valueFrom", 3, ENV_VAR_SOURCE, OPTIONAL),
    ),
    message(
        CORE,
        "EnvVarSource",
        field("fieldRef", 1, OBJECT_FIELD_SELECTOR, OPTIONAL),
        field("resourceFieldRef", 2, RESOURCE_FIELD_SELECTOR, OPTIONAL),
        field("configMapKeyRef", 3, CONFIG_MAP_KEY_SELECTOR, OPTIONAL),
        field("secretKeyRef", 4, SECRET_KEY_SELECTOR, OPTIONAL),
    ),
    message(
        CORE,
        "EnvFromSource",
        field("prefix", 1, STRING),
        field("configMapRef", 2, CONFIG_MAP_ENV_SOURCE, OPTIONAL),
        field("secretRef", 3, SECRET_ENV_SOURCE, OPTIONAL),
    ),
    message(
        CORE,
        "ConfigMapEnvSource",
        field("localObjectReference", 1, LOCAL_OBJECT_REFERENCE, INLINE),
        field("optional", 2, BOOL, OPTIONAL),
    ),
    message(
        CORE,
        "SecretEnvSource",
        field("localObjectReference", 1, LOCAL_OBJECT_REFERENCE, INLINE),
        field("optional", 2, BOOL, OPTIONAL),
    ),
    message(
        CORE,
        "ObjectFieldSelector",
        field("apiVersion", 1, STRING),
        field("fieldPath", 2, STRING, ALWAYS),
    ),
    message(
        CORE,
        "ResourceFieldSelector",
        field("containerName", 1, STRING),
        field("resource", 2, STRING, ALWAYS),
        field("divisor", 3, QUANTITY),
    ),
    message(
        CORE,
        "ConfigMapKeySelector",
        field("localObjectReference", 1, LOCAL_OBJECT_REFERENCE, INLINE),
        field("key", 2, STRING, ALWAYS),
        field("optional", 3, BOOL, OPTIONAL),
    ),
    message(
        CORE,
        "SecretKeySelector",
        field("localObjectReference", 1, LOCAL_OBJECT_REFERENCE, INLINE),
        field("key", 2, STRING, ALWAYS),
        field("optional", 3, BOOL, OPTIONAL),
    ),
    message(
        CORE,
        "ResourceRequirements",
        mapping("limits", 1, QUANTITY),
        mapping("requests", 2, QUANTITY),
        repeated("claims", 3, RESOURCE_CLAIM),
    ),
    message(CORE, "ResourceClaim", field("name", 1, STRING, ALWAYS), field("request", 2, STRING)),
    message(
        CORE,
        "Toleration",
        field("key", 1, STRING),
        field("operator", 2, STRING),
        field("value", 3, STRING),
        field("effect", 4, STRING),
        field("tolerationSeconds", 5, INT64, OPTIONAL),
    ),
    message(CORE, "PodSchedulingGate", field("name", 1, STRING, ALWAYS)),
    message(
        CORE,
        "TopologySpreadConstraint",
        field("maxSkew", 1, INT32, ALWAYS),
        field("topologyKey", 2, STRING, ALWAYS),
        field("whenUnsatisfiable", 3, STRING, ALWAYS),
        field("labelSelector", 4, LABEL_SELECTOR, OPTIONAL),
        field("minDomains", 5, INT32, OPTIONAL),
        field("nodeAffinityPolicy", 6, STRING, OPTIONAL),
        field("nodeTaintsPolicy", 7, STRING, OPTIONAL),
        repeated("matchLabelKeys", 8, STRING),
    ),
)

_AFFINITY = (
    message(
        CORE,
        "Affinity",
        field("nodeAffinity", 1, NODE_AFFINITY, OPTIONAL),
        field("podAffinity", 2, POD_AFFINITY, OPTIONAL),
        field("podAntiAffinity", 3, POD_ANTI_AFFINITY, OPTIONAL),
    ),
    message(
        CORE,
        "NodeAffinity",
        field("requiredDuringSchedulingIgnoredDuringExecution", 1, NODE_SELECTOR, OPTIONAL),
        repeated("preferredDuringSchedulingIgnoredDuringExecution", 2, PREFERRED_SCHEDULING_TERM),
    ),
    message(CORE, "NodeSelector", repeated("nodeSelectorTerms", 1, NODE_SELECTOR_TERM, NULLABLE)),
    message(
        CORE,
        "NodeSelectorTerm",
        repeated("matchExpressions", 1, NODE_SELECTOR_REQUIREMENT),
        repeated("matchFields", 2, NODE_SELECTOR_REQUIREMENT),
    ),
    message(
        CORE,
        "NodeSelectorRequirement",
        field("key", 1, STRING, ALWAYS),
        field("operator", 2, STRING, ALWAYS),
        repeated("values", 3, STRING),
    ),
    message(
        CORE,
        "PreferredSchedulingTerm",
        field("weight", 1, INT32, ALWAYS),
        field("preference", 2, NODE_SELECTOR_TERM),
    ),
    message(
        CORE,
        "PodAffinity",
        repeated("requiredDuringSchedulingIgnoredDuringExecution", 1, POD_AFFINITY_TERM),
        repeated("preferredDuringSchedulingIgnoredDuringExecution", 2, WEIGHTED_POD_AFFINITY_TERM),
    ),
    message(
        CORE,
        "PodAntiAffinity",
        repeated("requiredDuringSchedulingIgnoredDuringExecution", 1, POD_AFFINITY_TERM),
        repeated("preferredDuringSchedulingIgnoredDuringExecution", 2, WEIGHTED_POD_AFFINITY_TERM),
    ),
    message(
        CORE,
        "PodAffinityTerm",
        field("labelSelector", 1, LABEL_SELECTOR, OPTIONAL),
        repeated("namespaces", 2, STRING),
        field("topologyKey", 3, STRING, ALWAYS),
        field("namespaceSelector", 4, LABEL_SELECTOR, OPTIONAL),
        repeated("matchLabelKeys", 5, STRING),
        repeated("mismatchLabelKeys", 6, STRING),
    ),
    message(
        CORE,
        "WeightedPodAffinityTerm",
        field("weight", 1, INT32, ALWAYS),
        field("podAffinityTerm", 2, POD_AFFINITY_TERM),
    ),
)

_SECURITY = (
    message(
        CORE,
        "PodSecurityContext",
        field("seLinuxOptions", 1, SE_LINUX_OPTIONS, OPTIONAL),
        field("runAsUser", 2, INT64, OPTIONAL),
        field("runAsNonRoot", 3, BOOL, OPTIONAL),
        repeated("supplementalGroups", 4, INT64),
        field("fsGroup", 5, INT64, OPTIONAL),
        field("runAsGroup", 6, INT64, OPTIONAL),
        repeated("sysctls", 7, SYSCTL),
        field("windowsOptions", 8, WINDOWS_SECURITY_CONTEXT_OPTIONS, OPTIONAL),
        field("fsGroupChangePolicy", 9, STRING, OPTIONAL),
        field("seccompProfile", 10, SECCOMP_PROFILE, OPTIONAL),
        field("appArmorProfile", 11, APP_ARMOR_PROFILE, OPTIONAL),
        field("supplementalGroupsPolicy", 12, STRING, OPTIONAL),
        field("seLinuxChangePolicy", 13, STRING, OPTIONAL),
    ),
    message(
        CORE,
        "SecurityContext",
        field("capabilities", 1, CAPABILITIES, OPTIONAL),
        field("privileged", 2, BOOL, OPTIONAL),
        field("seLinuxOptions", 3, SE_LINUX_OPTIONS, OPTIONAL),
        field("runAsUser", 4, INT64, OPTIONAL),
        field("runAsNonRoot", 5, BOOL, OPTIONAL),
        field("readOnlyRootFilesystem", 6, BOOL, OPTIONAL),
        field("allowPrivilegeEscalation", 7, BOOL, OPTIONAL),
        field("runAsGroup", 8, INT64, OPTIONAL),
        field("procMount", 9, STRING, OPTIONAL),
        field("windowsOptions", 10, WINDOWS_SECURITY_CONTEXT_OPTIONS, OPTIONAL),
        field("seccompProfile", 11, SECCOMP_PROFILE, OPTIONAL),
        field("appArmorProfile", 12, APP_ARMOR_PROFILE, OPTIONAL),
    ),
    message(
        CORE,
        "SELinuxOptions",
        field("user", 1, STRING),
        field("role", 2, STRING),
        field("type", 3, STRING),
        field("level", 4, STRING),
    ),
    message(
        CORE,
        "WindowsSecurityContextOptions",
        field("gmsaCredentialSpecName", 1, STRING, OPTIONAL),
        field("gmsaCredentialSpec", 2, STRING, OPTIONAL),
        field("runAsUserName", 3, STRING, OPTIONAL),
        field("hostProcess", 4, BOOL, OPTIONAL),
    ),
    message(
        CORE,
        "SeccompProfile",
        field("type", 1, STRING, ALWAYS),
        field("localhostProfile", 2, STRING, OPTIONAL),
    ),
    message(
        CORE,
        "AppArmorProfile",
        field("type", 1, STRING, ALWAYS),
        field("localhostProfile", 2, STRING, OPTIONAL),
    ),
    message(CORE, "Sysctl", field("name", 1, STRING, ALWAYS), field("value", 2, STRING, ALWAYS)),
    message(CORE, "Capabilities", repeated("add", 1, STRING), repeated("drop", 2, STRING)),
)

MESSAGES = _OBJECTS + _SERVICE + _POD_TEMPLATE + _AFFINITY + _SECURITY
