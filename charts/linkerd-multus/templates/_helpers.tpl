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
The webhook's serving certificate, key and trust bundle, made once per rendering and shared by
the Secret and the MutatingWebhookConfiguration (stored in .Values as _certs): webhook.crtPEM,
keyPEM and caBundle when given; else what "linkerd-multus.keepOrRenew" decides from the
cluster.
*/}}
{{- define "linkerd-multus.certs" -}}
{{- if not (hasKey .Values "_certs") -}}
{{- $certs := dict -}}
{{- if .Values.webhook.crtPEM -}}
{{- $certs = dict "crt" .Values.webhook.crtPEM "key" .Values.webhook.keyPEM "ca" .Values.webhook.caBundle -}}
{{- else -}}
{{- $certs = include "linkerd-multus.keepOrRenew" . | fromJson -}}
{{- end -}}
{{- $_ := set .Values "_certs" $certs -}}
{{- end -}}
{{- end }}

{{/*
The certificates by `linkerd multus install`'s rule (src/extension/install/certificates.rs),
as JSON {crt, key, ca, decision}. The Secret the cluster holds (lookup) is the chart's or
install's when it carries their label and type, its tls.crt holds each of the Service's names
and a CA of its ca.crt issued it (the one whose key identifier tls.crt names); any other is
replaced, none of its CAs trusted. One of theirs is kept while its certificate is ECDSA P-256
and it and its CA stay valid 60 days more (install's renewal window), its ca.crt rebuilt from
that CA and at most one other CA still valid (the previous one). Otherwise (expiring, or RSA
from an earlier release of the chart) it is renewed: a new CA (10 years) and certificate
(1 year, for the Service's names), both ECDSA P-256, and the CA that issued the old
certificate, while it is valid, stays in the bundle after the new one, so replicas that have
not reloaded yet stay trusted. With no Secret, that CA is the first valid one of the
MutatingWebhookConfiguration's caBundle (what the replicas' files chain to when the Secret was
deleted). Helm's functions cannot check a key against its certificate, as install does.
`helm template` reads nothing: new ones every time.
*/}}
{{- define "linkerd-multus.keepOrRenew" -}}
{{- $ns := .Release.Namespace -}}
{{- $service := printf "linkerd-multus-webhook.%s.svc" $ns -}}
{{- $names := list "linkerd-multus-webhook" (printf "linkerd-multus-webhook.%s" $ns) $service (printf "%s.cluster.local" $service) -}}
{{- $now := (now).Unix -}}
{{- $horizon := add $now 5184000 -}}
{{- $block := "-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----" -}}
{{- $secret := lookup "v1" "Secret" $ns "linkerd-multus-webhook-tls" | default dict -}}
{{- $data := $secret.data | default dict -}}
{{- $crt := index $data "tls.crt" | default "" | b64dec -}}
{{- $key := index $data "tls.key" | default "" | b64dec -}}
{{- $bundle := index $data "ca.crt" | default "" | b64dec -}}
{{- $why := "" -}}
{{- $ours := false -}}
{{- $issuer := dict -}}
{{- $cas := list -}}
{{- if not (and $crt $key $bundle) -}}
{{- $why = "no Secret linkerd-multus-webhook-tls with tls.crt, tls.key and ca.crt" -}}
{{- $ours = true -}}
{{- $mwc := lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" "linkerd-multus-webhook" | default dict -}}
{{- $trusted := ($mwc.webhooks | default list) | first | default dict | dig "clientConfig" "caBundle" "" | b64dec -}}
{{- range regexFindAll $block $trusted -1 -}}
{{- $cas = append $cas (include "linkerd-multus.certInfo" . | fromJson) -}}
{{- end -}}
{{- else -}}
{{- range regexFindAll $block $bundle -1 -}}
{{- $cas = append $cas (include "linkerd-multus.certInfo" . | fromJson) -}}
{{- end -}}
{{- $leafPEM := regexFind $block $crt -}}
{{- $leaf := include "linkerd-multus.certInfo" $leafPEM | fromJson -}}
{{- $leafDER := regexReplaceAll "-----[A-Z ]+-----" $leafPEM "" | nospace | b64dec -}}
{{- range $cas -}}
{{- if and (not $issuer) .ca .ski (eq .ski $leaf.aki) }}{{ $issuer = . }}{{ end -}}
{{- end -}}
{{- $missing := list -}}
{{- range $names -}}
{{- if not (contains (print "\x82" (printf "%c" (len .)) .) $leafDER) }}{{ $missing = append $missing . }}{{ end -}}
{{- end -}}
{{- if ne (dig "metadata" "labels" "linkerd.io/extension" "" $secret) "multus" -}}
{{- $why = "it lacks the label linkerd.io/extension=multus" -}}
{{- else if ne ($secret.type | default "") "kubernetes.io/tls" -}}
{{- $why = "its type is not kubernetes.io/tls" -}}
{{- else if not $leaf.notAfter -}}
{{- $why = "tls.crt holds no certificate the chart can read" -}}
{{- else if $missing -}}
{{- $why = printf "tls.crt is not for %s" (join ", " $missing) -}}
{{- else if not $issuer -}}
{{- $why = "ca.crt holds no CA that issued tls.crt" -}}
{{- else -}}
{{- $ours = true -}}
{{- if not $leaf.p256 -}}
{{- $why = "tls.crt's key is not ECDSA P-256" -}}
{{- else if not (regexMatch "^-----BEGIN (EC )?PRIVATE KEY-----" $key) -}}
{{- $why = "tls.key holds no private key" -}}
{{- else if gt (int64 $leaf.notBefore) $now -}}
{{- $why = "tls.crt is not valid yet" -}}
{{- else if le (int64 $leaf.notAfter) $horizon -}}
{{- $why = "tls.crt expires within 60 days" -}}
{{- else if le (int64 $issuer.notAfter) $horizon -}}
{{- $why = "its CA expires within 60 days" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $previous := list -}}
{{- if not $why -}}
{{- range without $cas $issuer -}}
{{- if and (not $previous) .ca (le (int64 .notBefore) $now) (gt (int64 .notAfter) $now) }}{{ $previous = list . }}{{ end -}}
{{- end -}}
{{- $kept := prepend $previous $issuer -}}
{{- $pems := list -}}
{{- range $kept }}{{ $pems = append $pems .pem }}{{ end -}}
{{- $rebuilt := printf "%s\n" (join "\n" $pems) -}}
{{- if eq (len $kept) (len $cas) | and (eq (index $cas 0).pem $issuer.pem) -}}
{{- $rebuilt = $bundle -}}
{{- end -}}
{{- dict "crt" $crt "key" $key "ca" $rebuilt "decision" (ternary "kept" (printf "kept; the caBundle rebuilt without %d certificate(s) the chart did not put there" (sub (len $cas) (len $kept))) (eq $rebuilt $bundle)) | toJson -}}
{{- else -}}
{{- if $ours -}}
{{- range ternary (list $issuer) $cas (not (empty $issuer)) -}}
{{- if and (not $previous) .ca (le (int64 .notBefore) $now) (gt (int64 .notAfter) $now) }}{{ $previous = list . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $ca := genCAWithKey "linkerd-multus-webhook-ca" 3650 (genPrivateKey "ecdsa") -}}
{{- $cert := genSignedCertWithKey $service nil $names 365 $ca (genPrivateKey "ecdsa") -}}
{{- $out := $ca.Cert -}}
{{- range $previous }}{{ $out = printf "%s%s\n" $out .pem }}{{ end -}}
{{- $decision := ternary (printf "renewed (%s); the old CA stays in the caBundle while the replicas reload" $why) (printf "replaced the Secret (%s): none of its CAs is trusted" $why) $ours -}}
{{- if not $secret }}{{ $decision = ternary "made new certificates; the CA the webhook configuration trusted stays in the caBundle while the replicas reload" "made new certificates" (gt (len $previous) 0) }}{{ end -}}
{{- dict "crt" $cert.Cert "key" $cert.Key "ca" $out "decision" $decision | toJson -}}
{{- end -}}
{{- end }}

{{/*
What the chart reads of one certificate (PEM) without an X.509 parser (Helm's template
functions have none): byte patterns of its DER, as JSON. "pem": the certificate; "notBefore", "notAfter": its validity, Unix seconds (0: not found); "ca": its basic
constraints say CA; "p256": its key is ECDSA P-256; "ski", "aki": its subject and authority key
identifiers (20 bytes, as Go and rcgen make them), base64, or "".
*/}}
{{- define "linkerd-multus.certInfo" -}}
{{- $der := regexReplaceAll "-----[A-Z ]+-----" . "" | nospace | b64dec -}}
{{- $info := dict "pem" . "notBefore" 0 "notAfter" 0 "ca" false "ski" "" "aki" "" -}}
{{- $validity := regexFind "0[\\x1e\\x20\\x22](?:\\x17\\r[0-9]{12}Z|\\x18\\x0f[0-9]{14}Z){2}" $der -}}
{{- $times := regexFindAll "[0-9]{12}(?:[0-9]{2})?Z" $validity -1 -}}
{{- if eq (len $times) 2 -}}
{{- range $i, $t := $times -}}
{{- if eq (len $t) 13 }}{{ $t = printf "%s%s" (ternary "19" "20" (ge (atoi (substr 0 2 $t)) 50)) $t }}{{ end -}}
{{- $_ := set $info (ternary "notBefore" "notAfter" (eq $i 0)) (toDate "20060102150405Z07:00" $t).Unix -}}
{{- end -}}
{{- end -}}
{{- $_ := set $info "p256" (contains "\x30\x59\x30\x13\x06\x07\x2a\x86\x48\xce\x3d\x02\x01\x06\x08\x2a\x86\x48\xce\x3d\x03\x01\x07" $der) -}}
{{- $parts := splitList "\x06\x03\x55\x1d\x13" $der -}}
{{- if eq (len $parts) 2 -}}
{{- $bc := index $parts 1 | trimPrefix "\x01\x01\xff" -}}
{{- $_ := set $info "ca" (and (eq (substr 0 1 $bc) "\x04") (eq (substr 2 3 $bc) "\x30") (eq (substr 4 7 $bc) "\x01\x01\xff")) -}}
{{- end -}}
{{- $parts = splitList "\x06\x03\x55\x1d\x0e\x04\x16\x04\x14" $der -}}
{{- if eq (len $parts) 2 }}{{ $_ := set $info "ski" (index $parts 1 | substr 0 20 | b64enc) }}{{ end -}}
{{- $parts = splitList "\x06\x03\x55\x1d\x23\x04\x18\x30\x16\x80\x14" $der -}}
{{- if eq (len $parts) 2 }}{{ $_ := set $info "aki" (index $parts 1 | substr 0 20 | b64enc) }}{{ end -}}
{{- toJson $info -}}
{{- end }}

{{/*
The Service's annotations, as YAML: with certs=openshift-service-ca, the one that asks
OpenShift's service CA operator for the Secret (it renews the certificate, and the CA with an
overlap, itself).
*/}}
{{- define "linkerd-multus.serviceAnnotations" -}}
{{- if eq .Values.certs "openshift-service-ca" -}}
service.beta.openshift.io/serving-cert-secret-name: linkerd-multus-webhook-tls
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

{{/*
The webhook configuration's annotations, as YAML: cert-manager's CA injection, or OpenShift's
service CA's.
*/}}
{{- define "linkerd-multus.webhookAnnotations" -}}
{{- if eq .Values.certs "cert-manager" -}}
cert-manager.io/inject-ca-from: {{ printf "%s/linkerd-multus-webhook" .Release.Namespace }}
{{- else if eq .Values.certs "openshift-service-ca" -}}
service.beta.openshift.io/inject-cabundle: "true"
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
