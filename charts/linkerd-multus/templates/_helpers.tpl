{{/*
The image reference: REGISTRY/NAME, then :TAG (the chart's appVersion unless set; left out
when only a digest is given), then @DIGEST when set.
*/}}
{{- define "linkerd-multus.image" -}}
{{- $ref := printf "%s/%s" .Values.image.registry .Values.image.name -}}
{{- $tag := .Values.image.tag | default (ternary "" .Chart.AppVersion (ne .Values.image.digest "")) -}}
{{- if $tag }}{{ $ref = printf "%s:%s" $ref $tag }}{{ end -}}
{{- if .Values.image.digest }}{{ $ref = printf "%s@%s" $ref .Values.image.digest }}{{ end -}}
{{- $ref -}}
{{- end }}

{{/* The Deployment's --network-resources: the settings file when the rules are on. */}}
{{- define "linkerd-multus.networkResourcesFile" -}}
{{- if .Values.networkResources }}/etc/linkerd-multus/network-resources/network-resources.yaml{{ end -}}
{{- end }}

{{/*
The Deployment's --cluster-cidrs, a list the webhook reads as YAML ([] for none); refused when
skipSecondarySubnets is enabled without them, as the webhook would refuse to start.
*/}}
{{- define "linkerd-multus.clusterCIDRs" -}}
{{- if and (eq .Values.skipSecondarySubnets "enabled") (not .Values.clusterCIDRs) -}}
{{- fail "skipSecondarySubnets is enabled but clusterCIDRs is empty: without the cluster's pod and service networks, a secondary network's subnet that overlaps them would take meshed traffic away from the proxy, so the webhook refuses to start; set clusterCIDRs (for example [10.244.0.0/16, 10.96.0.0/12]), or leave skipSecondarySubnets disabled" -}}
{{- end -}}
{{- printf "[%s]" (join ", " .Values.clusterCIDRs) -}}
{{- end }}

{{/*
"true" when the NAD controller restarts stale workloads, "" otherwise; refused without
manageNADs, as the restarts are the NAD controller's, and their pacing refused without them.
*/}}
{{- define "linkerd-multus.restartStaleWorkloads" -}}
{{- if and (not .Values.restartStaleWorkloads) (or (ne (int .Values.restartConcurrency) 1) (ne (toString .Values.restartDeadline) "10m")) -}}
{{- fail "restartConcurrency and restartDeadline pace the NAD controller's restarts, but restartStaleWorkloads is false: set restartStaleWorkloads to true (with manageNADs), or leave them at their defaults" -}}
{{- end -}}
{{- if .Values.restartStaleWorkloads -}}
{{- if not .Values.manageNADs -}}
{{- fail "restartStaleWorkloads is true but manageNADs is false: the restarts are the NAD controller's, which restarts the workloads after it updates their namespace's NAD; set manageNADs to true too, or leave restartStaleWorkloads false" -}}
{{- end -}}
true
{{- end -}}
{{- end }}

{{/*
The namespaces whose pods never reach the webhook, as JSON: the platform's (OpenShift:
openshift, openshift-*), then webhookExcludedNamespaces, each once.
*/}}
{{- define "linkerd-multus.excludedNamespaces" -}}
{{- $list := ternary (list "openshift" "openshift-*") (list) (eq .Values.platform "openshift") -}}
{{- range .Values.webhookExcludedNamespaces }}{{ if not (has . $list) }}{{ $list = append $list . }}{{ end }}{{ end -}}
{{- toJson $list -}}
{{- end }}

{{/* The same, as the CEL expression of the webhook reads it: [a, b]. */}}
{{- define "linkerd-multus.excludedNamespacesList" -}}
{{- printf "[%s]" (include "linkerd-multus.excludedNamespaces" . | fromJsonArray | join ", ") -}}
{{- end }}

{{/*
The namespaces allowed to scrape the ops port, as JSON: metricsNamespaces, else the
platform's (monitoring; on OpenShift, openshift-monitoring and
openshift-user-workload-monitoring).
*/}}
{{- define "linkerd-multus.metricsNamespaces" -}}
{{- if .Values.metricsNamespaces -}}
{{- toJson .Values.metricsNamespaces -}}
{{- else if eq .Values.platform "openshift" -}}
{{- toJson (list "openshift-monitoring" "openshift-user-workload-monitoring") -}}
{{- else -}}
{{- toJson (list "monitoring") -}}
{{- end -}}
{{- end }}

{{/*
The webhook's serving certificate, CA and key, made once per rendering and shared by the
Secret and the MutatingWebhookConfiguration (stored in .Values as _certs): webhook.crtPEM,
keyPEM and caBundle when given; else the Secret the cluster holds, when there is one (an
upgrade keeps it: no new CA, no restart); else new ones, valid for the Service's names (a
10-year CA, a 1-year certificate; to renew, delete the Secret and upgrade).
*/}}
{{- define "linkerd-multus.certs" -}}
{{- if not (hasKey .Values "_certs") -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace "linkerd-multus-webhook-tls" -}}
{{- $certs := dict -}}
{{- if .Values.webhook.crtPEM -}}
{{- $certs = dict "crt" .Values.webhook.crtPEM "key" .Values.webhook.keyPEM "ca" .Values.webhook.caBundle -}}
{{- else if and $secret $secret.data (index $secret.data "tls.crt") (index $secret.data "tls.key") (index $secret.data "ca.crt") -}}
{{- $certs = dict "crt" (index $secret.data "tls.crt" | b64dec) "key" (index $secret.data "tls.key" | b64dec) "ca" (index $secret.data "ca.crt" | b64dec) -}}
{{- else -}}
{{- $service := printf "linkerd-multus-webhook.%s.svc" .Release.Namespace -}}
{{- $ca := genCA "linkerd-multus-webhook-ca" 3650 -}}
{{- $names := list "linkerd-multus-webhook" (printf "linkerd-multus-webhook.%s" .Release.Namespace) $service (printf "%s.cluster.local" $service) -}}
{{- $cert := genSignedCert $service nil $names 365 $ca -}}
{{- $certs = dict "crt" $cert.Cert "key" $cert.Key "ca" $ca.Cert -}}
{{- end -}}
{{- $_ := set .Values "_certs" $certs -}}
{{- end -}}
{{- end }}

{{/* Does the chart render the Secret (and the caBundle from it)? */}}
{{- define "linkerd-multus.ownSecret" -}}
{{- if and (eq .Values.certs "generate") (not .Values.webhook.externalSecret) }}true{{ end -}}
{{- end }}

{{/* The caBundle of the webhook configuration, base64, or nothing (cainjector sets it). */}}
{{- define "linkerd-multus.caBundle" -}}
{{- if include "linkerd-multus.ownSecret" . -}}
{{- include "linkerd-multus.certs" . -}}
{{- .Values._certs.ca | b64enc -}}
{{- else if and .Values.webhook.externalSecret .Values.webhook.caBundle -}}
{{- .Values.webhook.caBundle | b64enc -}}
{{- end -}}
{{- end }}

{{/* The webhook configuration's annotations, as YAML: cert-manager's CA injection. */}}
{{- define "linkerd-multus.webhookAnnotations" -}}
{{- if eq .Values.certs "cert-manager" -}}
cert-manager.io/inject-ca-from: {{ printf "%s/linkerd-multus-webhook" .Release.Namespace }}
{{- else if .Values.webhook.injectCaFrom -}}
cert-manager.io/inject-ca-from: {{ .Values.webhook.injectCaFrom }}
{{- else if .Values.webhook.injectCaFromSecret -}}
cert-manager.io/inject-ca-from-secret: {{ .Values.webhook.injectCaFromSecret }}
{{- end -}}
{{- end }}

{{/*
Who may reach the webhook's port 8443, as JSON {"cidrs": [...], "hostNetwork": bool,
"listed": bool}: apiServerCIDRs when given; on OpenShift, host-network traffic (its API server
runs on the host's network); else the API server's ready addresses as the cluster lists them
(the EndpointSlice default/kubernetes, read with lookup, which finds nothing in `helm template`),
one /32 or /128 each, as `linkerd multus install` reads them; else no block: every address.
*/}}
{{- define "linkerd-multus.apiServerCallers" -}}
{{- $cidrs := list -}}
{{- $hostNetwork := false -}}
{{- $listed := false -}}
{{- if .Values.apiServerCIDRs -}}
{{- $cidrs = .Values.apiServerCIDRs -}}
{{- else if eq .Values.platform "openshift" -}}
{{- $hostNetwork = true -}}
{{- else -}}
{{- $slice := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes" -}}
{{- range ($slice.endpoints | default list) -}}
{{- if ne (toString (dig "conditions" "ready" true .)) "false" -}}
{{- range .addresses -}}
{{- $cidrs = append $cidrs (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $cidrs = $cidrs | uniq | sortAlpha -}}
{{- $listed = gt (len $cidrs) 0 -}}
{{- end -}}
{{- dict "cidrs" $cidrs "hostNetwork" $hostNetwork "listed" $listed | toJson -}}
{{- end }}

{{/* Whether every address may reach the webhook's port: "true" or nothing. */}}
{{- define "linkerd-multus.webhookPortOpen" -}}
{{- $callers := include "linkerd-multus.apiServerCallers" . | fromJson -}}
{{- $open := not (or $callers.hostNetwork $callers.cidrs) -}}
{{- range $callers.cidrs -}}
{{- if hasSuffix "/0" . }}{{ $open = true }}{{ end -}}
{{- end -}}
{{- if $open }}true{{ end -}}
{{- end }}
