//! The webhook metrics' unit tests: every series from the start.

use super::*;

#[test]
fn every_series_is_there_from_the_start() {
    let metrics = Metrics::new();
    metrics.answered(
        Outcome::Patched,
        &[Change::Attached, Change::ProxyUidSet("5".into())],
        true,
        Duration::from_micros(80),
    );
    metrics.refused(Refusal::TooLarge);
    metrics.live_read(LiveObject::Nad, LiveResult::Refused);
    metrics.on_error(true);
    metrics.certificate_expiry(Some(1_900_000_000));
    let text = metrics.encode(
        Some(CacheStatus {
            synced: true,
            watch_up: false,
            age_seconds: 12.5,
            entries: 3,
            lists: 2,
        }),
        None,
    );
    for line in [
        "linkerd_multus_admission_requests_total{outcome=\"patched\"} 1",
        "linkerd_multus_admission_requests_total{outcome=\"denied\"} 0",
        "linkerd_multus_admission_patches_total{change=\"attached\"} 1",
        "linkerd_multus_admission_patches_total{change=\"proxy_uid_set\"} 1",
        "linkerd_multus_admission_patches_total{change=\"network_resources\"} 1",
        "linkerd_multus_admission_patches_total{change=\"detached\"} 0",
        "linkerd_multus_http_refusals_total{reason=\"too_large\"} 1",
        "linkerd_multus_http_refusals_total{reason=\"over_budget\"} 0",
        "linkerd_multus_http_refusals_total{reason=\"connection_limit\"} 0",
        "linkerd_multus_http_connections 0",
        "linkerd_multus_http_evictions_total{state=\"handshake\"} 0",
        "linkerd_multus_http_evictions_total{state=\"idle\"} 0",
        "linkerd_multus_http_idle_closes_total 0",
        "linkerd_multus_http_body_bytes_in_flight 0",
        "linkerd_multus_admission_request_duration_seconds_bucket{le=\"0.0001\"} 1",
        "linkerd_multus_admission_request_duration_seconds_count 1",
        "linkerd_multus_namespace_cache_namespaces 3",
        "linkerd_multus_namespace_cache_synced 1",
        "linkerd_multus_namespace_watch_up 0",
        "linkerd_multus_namespace_cache_age_seconds 12.5",
        "linkerd_multus_namespace_cache_lists_total 2",
        "linkerd_multus_tls_reloads_total{result=\"error\"} 0",
        "linkerd_multus_live_reads_total{object=\"nad\",result=\"refused\"} 1",
        "linkerd_multus_live_reads_total{object=\"namespace\",result=\"found\"} 0",
        "linkerd_multus_admission_on_error_total{answer=\"deny\"} 1",
        "linkerd_multus_admission_on_error_total{answer=\"allow\"} 0",
        "linkerd_multus_tls_certificate_expiry_timestamp_seconds 1900000000",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from\n{text}"
        );
    }
    assert!(text.ends_with("# EOF\n"));
    assert!(
        !text.contains("linkerd_multus_nad_"),
        "no NAD series without the NAD cache"
    );
}

#[test]
fn the_nad_cache_has_its_own_series() {
    let metrics = Metrics::with_nad_cache();
    let status = |synced, entries| CacheStatus {
        synced,
        watch_up: synced,
        age_seconds: 0.0,
        entries,
        lists: u64::from(synced),
    };
    let text = metrics.encode(Some(status(true, 7)), Some(status(false, 0)));
    for line in [
        "linkerd_multus_namespace_cache_namespaces 7",
        "linkerd_multus_namespace_cache_synced 1",
        "linkerd_multus_nad_cache_nads 0",
        "linkerd_multus_nad_cache_synced 0",
        "linkerd_multus_nad_watch_up 0",
        "linkerd_multus_nad_cache_age_seconds 0.0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from\n{text}"
        );
    }
}
