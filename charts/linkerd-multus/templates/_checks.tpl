{{/*
The chart's refusals beyond values.schema.json: what `linkerd multus install` refuses and JSON
schema cannot say, each with install's reason (src/extension/install/options/checks.rs), held
together by tests/helm_chart_refusals.rs. checks.yaml runs them; they render nothing.
*/}}
{{- define "linkerd-multus.checks" -}}
{{- $ns := .Release.Namespace -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $ns) -}}
{{- fail (printf "the release's namespace %q is not a namespace name: lower-case letters, digits and '-', at most 63" $ns) -}}
{{- end -}}
{{- if gt (len $ns) 63 -}}
{{- fail (printf "the release's namespace %q is not a namespace name: lower-case letters, digits and '-', at most 63" $ns) -}}
{{- end -}}
{{- with include "linkerd-multus.reserved" (dict "name" $ns "linkerd" .Values.linkerdNamespace "cni" .Values.cniNamespace) -}}
{{- fail (printf "the release's namespace %q is %s: the chart puts linkerd-multus only in a namespace of its own, which the webhook never calls for (its namespaceSelector leaves it out) and whose pods are the extension's; install the release in another (helm install --namespace linkerd-multus)" $ns .) -}}
{{- end -}}
{{- $platform := ternary (list "openshift" "openshift-*") (list) (eq .Values.platform "openshift") -}}
{{- range (concat $platform .Values.webhookExcludedNamespaces | uniq) -}}
{{- $prefix := trimSuffix "*" . -}}
{{- $kept := ternary (hasPrefix $prefix $.Values.linkerdNamespace) (eq . $.Values.linkerdNamespace) (hasSuffix "*" .) -}}
{{- if $kept -}}
{{- $from := ternary (printf " (from platform %s)" $.Values.platform) "" (has . $platform) -}}
{{- fail (printf "webhookExcludedNamespaces %q%s keeps the Linkerd control plane's namespace %s away from the webhook: its pods would start without linkerd-cni; leave it out, or name the namespaces to keep away one by one" . $from $.Values.linkerdNamespace) -}}
{{- end -}}
{{- end -}}
{{- range $key := list "apiServerCIDRs" "clusterCIDRs" "protectedCIDRs" -}}
{{- range (index $.Values $key) -}}
{{- include "linkerd-multus.checkCIDR" (dict "key" $key "cidr" .) -}}
{{- end -}}
{{- end -}}
{{- if and (ne .Values.cniNamespace "linkerd-cni") (not .Values.manageNADs) -}}
{{- fail (printf "cniNamespace %q is for the NAD controller: set manageNADs to true, or leave it out" .Values.cniNamespace) -}}
{{- end -}}
{{- if not (include "linkerd-multus.duration" .Values.restartDeadline) -}}
{{- fail (printf "restartDeadline: must be a positive duration such as 10m or 1h30m, not %q" (toString .Values.restartDeadline)) -}}
{{- end -}}
{{- if not (or (include "linkerd-multus.caBundle" .) (include "linkerd-multus.webhookAnnotations" .)) -}}
{{- fail "webhook.externalSecret is true but no CA source is given: the webhook configuration would have no caBundle, and under failurePolicy Fail the API server would refuse every pod create in the namespaces it selects; set webhook.caBundle (the CA's PEM), webhook.injectCaFrom or webhook.injectCaFromSecret (cainjector writes it), or use certs: cert-manager or openshift-service-ca" -}}
{{- end -}}
{{- end }}

{{/*
Whose the namespace .name is when the extension may never have it (nothing when it may), as
src/k8s/reserved.rs lists them: by prefix, by name, or as the Linkerd control plane's (.linkerd)
or Linkerd-CNI's (.cni).
*/}}
{{- define "linkerd-multus.reserved" -}}
{{- $names := dict "default" "Kubernetes's own" "openshift" "OpenShift's own" "linkerd" "the Linkerd control plane's" "linkerd-cni" "Linkerd-CNI's" "linkerd-viz" "a Linkerd extension's" "linkerd-jaeger" "a Linkerd extension's" "linkerd-multicluster" "a Linkerd extension's" "linkerd-smi" "a Linkerd extension's" "linkerd-failover" "a Linkerd extension's" "linkerd-buoyant" "a Linkerd extension's" "cert-manager" "cert-manager's" -}}
{{- if hasPrefix "kube-" .name -}}Kubernetes's own
{{- else if hasPrefix "openshift-" .name -}}OpenShift's own
{{- else if hasKey $names .name -}}{{ index $names .name }}
{{- else if eq .name .linkerd -}}the Linkerd control plane's
{{- else if eq .name .cni -}}Linkerd-CNI's
{{- end -}}
{{- end }}

{{/*
A duration as the webhook and the NAD controller read it (humantime: whole numbers, each with
its unit), in its one written form (h, m, s, ms, us, ns, each when not zero: 1h30m), as
`install` writes it; nothing for a zero or unreadable one.
*/}}
{{- define "linkerd-multus.duration" -}}
{{- $text := toString . -}}
{{- $units := dict "nanos" 1 "nsec" 1 "ns" 1 "usec" 1000 "us" 1000 "µs" 1000 "millis" 1000000 "msec" 1000000 "ms" 1000000 -}}
{{- $second := 1000000000 -}}
{{- range $unit, $seconds := dict "seconds" 1 "second" 1 "secs" 1 "sec" 1 "s" 1 "minutes" 60 "minute" 60 "min" 60 "mins" 60 "m" 60 "hours" 3600 "hour" 3600 "hr" 3600 "hrs" 3600 "h" 3600 "days" 86400 "day" 86400 "d" 86400 "weeks" 604800 "week" 604800 "wk" 604800 "wks" 604800 "w" 604800 "months" 2630016 "month" 2630016 "M" 2630016 "years" 31557600 "year" 31557600 "yr" 31557600 "yrs" 31557600 "y" 31557600 -}}
{{- $_ := set $units $unit (mul $seconds $second) -}}
{{- end -}}
{{- $total := 0 -}}
{{- $ok := regexMatch "^ *([0-9]+ *[a-zA-Zµ]+ *)+$" $text -}}
{{- range regexFindAll "[0-9]+ *[a-zA-Zµ]+" $text -1 -}}
{{- $unit := regexFind "[a-zA-Zµ]+$" . -}}
{{- if hasKey $units $unit -}}
{{- $total = add $total (mul (atoi (regexFind "^[0-9]+" .)) (index $units $unit)) -}}
{{- else -}}
{{- $ok = false -}}
{{- end -}}
{{- end -}}
{{- if and $ok (gt (int64 $total) 0) -}}
{{- range list (list "h" 3600000000000) (list "m" 60000000000) (list "s" 1000000000) (list "ms" 1000000) (list "us" 1000) (list "ns" 1) -}}
{{- $n := div $total (index . 1) -}}
{{- if $n -}}
{{- printf "%d%s" $n (index . 0) -}}
{{- $total = sub $total (mul $n (index . 1)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
Fails unless .cidr, an item of the value .key, is a CIDR in canonical form as `install` takes
it (an IP address, no host bits set), with install's reason; renders nothing.
*/}}
{{- define "linkerd-multus.checkCIDR" -}}
{{- $text := .cidr -}}
{{- $parts := splitList "/" $text -}}
{{- $address := first $parts -}}
{{- $prefix := atoi (last $parts) -}}
{{- $bad := printf "%s %q is not a CIDR: %q is not an IP address" .key $text $address -}}
{{- $groups := list -}}
{{- $width := 8 -}}
{{- if contains ":" $address -}}
{{- $width = 16 -}}
{{- $hex := dict "0" 0 "1" 1 "2" 2 "3" 3 "4" 4 "5" 5 "6" 6 "7" 7 "8" 8 "9" 9 "a" 10 "b" 11 "c" 12 "d" 13 "e" 14 "f" 15 -}}
{{- $halves := splitList "::" $address -}}
{{- if gt (len $halves) 2 }}{{ fail $bad }}{{ end -}}
{{- $sides := list -}}
{{- range $halves -}}
{{- $side := list -}}
{{- if . -}}
{{- $items := splitList ":" . -}}
{{- range $i, $item := $items -}}
{{- if and (contains "." $item) (eq $i (sub (len $items) 1)) -}}
{{- $octets := include "linkerd-multus.ipv4" (dict "text" $item "bad" $bad) | fromJsonArray -}}
{{- $side = append $side (add (mul (index $octets 0) 256) (index $octets 1)) -}}
{{- $side = append $side (add (mul (index $octets 2) 256) (index $octets 3)) -}}
{{- else if regexMatch "^[0-9a-fA-F]{1,4}$" $item -}}
{{- $value := 0 -}}
{{- range splitList "" (lower $item) }}{{ $value = add (mul $value 16) (index $hex .) }}{{ end -}}
{{- $side = append $side $value -}}
{{- else -}}
{{- fail $bad -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $sides = append $sides $side -}}
{{- end -}}
{{- if eq (len $halves) 2 -}}
{{- $given := add (len (index $sides 0)) (len (index $sides 1)) -}}
{{- if gt $given 7 }}{{ fail $bad }}{{ end -}}
{{- $groups = index $sides 0 -}}
{{- range until (int (sub 8 $given)) }}{{ $groups = append $groups 0 }}{{ end -}}
{{- $groups = concat $groups (index $sides 1) -}}
{{- else -}}
{{- $groups = index $sides 0 -}}
{{- if ne (len $groups) 8 }}{{ fail $bad }}{{ end -}}
{{- end -}}
{{- else -}}
{{- $groups = include "linkerd-multus.ipv4" (dict "text" $address "bad" $bad) | fromJsonArray -}}
{{- end -}}
{{- $network := list -}}
{{- range $i, $group := $groups -}}
{{- $host := max 0 (min $width (sub (mul (add $i 1) $width) $prefix)) -}}
{{- $size := int (index (list 1 2 4 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768 65536) $host) -}}
{{- $network = append $network (sub (int $group) (mod (int $group) $size)) -}}
{{- end -}}
{{- if ne (toJson $network) (toJson $groups) -}}
{{- $max := ternary 128 32 (eq $width 16) -}}
{{- $at := include "linkerd-multus.ipText" (dict "groups" $groups "width" $width) -}}
{{- fail (printf "%s %q has host bits set: the network is %s/%d; write that, or %s/%d for the one address" .key $text (include "linkerd-multus.ipText" (dict "groups" $network "width" $width)) $prefix $at $max) -}}
{{- end -}}
{{- end }}

{{/* The four octets of the IPv4 address .text as JSON, or fail with .bad (Rust's reading). */}}
{{- define "linkerd-multus.ipv4" -}}
{{- $octets := list -}}
{{- $items := splitList "." .text -}}
{{- if ne (len $items) 4 }}{{ fail .bad }}{{ end -}}
{{- range $items -}}
{{- if or (not (regexMatch "^(0|[1-9][0-9]{0,2})$" .)) (gt (atoi .) 255) }}{{ fail $.bad }}{{ end -}}
{{- $octets = append $octets (atoi .) -}}
{{- end -}}
{{- toJson $octets -}}
{{- end }}

{{/*
An address's text as Rust writes it: IPv4 dotted; IPv6 lower-case hex groups, the first
longest run of two or more zero groups written `::`, an IPv4-mapped one ::ffff:a.b.c.d.
*/}}
{{- define "linkerd-multus.ipText" -}}
{{- $g := .groups -}}
{{- if eq (int .width) 8 -}}
{{- join "." $g -}}
{{- else if eq (toJson (slice $g 0 6)) "[0,0,0,0,0,65535]" -}}
{{- printf "::ffff:%d.%d.%d.%d" (div (index $g 6) 256) (mod (index $g 6) 256) (div (index $g 7) 256) (mod (index $g 7) 256) -}}
{{- else -}}
{{- $best := 0 }}{{ $bestAt := -1 }}{{ $run := 0 -}}
{{- range $i, $v := $g -}}
{{- if eq (int $v) 0 }}{{ $run = add $run 1 }}{{ else }}{{ $run = 0 }}{{ end -}}
{{- if gt $run $best }}{{ $best = $run }}{{ $bestAt = sub (add $i 1) $run }}{{ end -}}
{{- end -}}
{{- $hex := list -}}
{{- range $g }}{{ $hex = append $hex (printf "%x" .) }}{{ end -}}
{{- if lt $best 2 -}}
{{- join ":" $hex -}}
{{- else -}}
{{- printf "%s::%s" (join ":" (slice $hex 0 (int $bestAt))) (join ":" (slice $hex (int (add $bestAt $best)))) -}}
{{- end -}}
{{- end -}}
{{- end }}
