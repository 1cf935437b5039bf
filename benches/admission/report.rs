//! The admission benchmark's report: the table of figures and the target.

use crate::process::Guarded;
use std::fmt::Write as _;
use std::process::Command;

use crate::kube_apiserver;
use crate::load::Figures;
use crate::{Config, Plan, TARGET};

pub(crate) fn print_table(plan: &Plan, configs: &[Config; 3], figures: &[Figures; 3]) {
    let mut out = setup(plan, configs);
    writeln!(
        out,
        "{:<24} {:>9} {:>9} {:>9} {:>16} {:>18}",
        "configuration", "p50 ms", "p99 ms", "req/s", "API CPU µs/req", "server CPU µs/req"
    )
    .unwrap();
    for (config, f) in configs.iter().zip(figures) {
        writeln!(
            out,
            "{:<24} {:>9.3} {:>9.3} {:>9.0} {:>16.0} {:>18}",
            config.name,
            f.p50,
            f.p99,
            f.rate,
            f.api_cpu_us,
            if f.server_cpu_us.is_nan() {
                "-".to_string()
            } else {
                format!("{:.0}", f.server_cpu_us)
            }
        )
        .unwrap();
    }
    let [none, base, hook] = figures;
    let ratio = |label: &str, a: &Figures, b: &Figures| {
        format!(
            "{label:<24} {:>9.3} {:>9.3} {:>9.3} {:>16.3}",
            a.p50 / b.p50,
            a.p99 / b.p99,
            a.rate / b.rate,
            a.api_cpu_us / b.api_cpu_us
        )
    };
    writeln!(out, "{}", ratio("webhook / baseline", hook, base)).unwrap();
    writeln!(out, "{}", ratio("baseline / no webhook", base, none)).unwrap();
    writeln!(out).unwrap();
    let (p50, p99) = (hook.p50 / base.p50, hook.p99 / base.p99);
    let verdict = if plan.quick {
        "not judged in a quick run"
    } else if p50 <= TARGET && p99 <= TARGET {
        "met"
    } else {
        "missed"
    };
    writeln!(
        out,
        "target: the webhook adds no more than {:.0}% to the baseline's p50 and p99 at the API server: p50 {:+.1}%, p99 {:+.1}%: {verdict}",
        (TARGET - 1.0) * 100.0,
        (p50 - 1.0) * 100.0,
        (p99 - 1.0) * 100.0
    )
    .unwrap();
    print!("{out}");
}

/// What was measured, and how.
fn setup(plan: &Plan, configs: &[Config; 3]) -> String {
    let mut out = String::new();
    let api_version = kube_apiserver::assets()
        .ok()
        .and_then(|dir| {
            Command::new(dir.join("kube-apiserver"))
                .arg("--version")
                .guarded_output()
                .ok()
        })
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    writeln!(out).unwrap();
    writeln!(
        out,
        "measured: server-side dry-run pod creates (POST /api/v1/namespaces/NS/pods?dryRun=All) at a real kube-apiserver ({api_version}) with etcd,"
    )
    .unwrap();
    writeln!(
        out,
        "          the captured pod-create pod as JSON, the admin's client certificate, TLS and HTTP/1.1 keep-alive;"
    )
    .unwrap();
    writeln!(
        out,
        "          closed loop on {} connections, {} round(s) of {:.1} s per configuration, alternating; medians of the rounds;",
        plan.connections,
        plan.rounds,
        plan.duration.as_secs_f64()
    )
    .unwrap();
    writeln!(
        out,
        "          1 load generator thread on the same {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )
    .unwrap();
    writeln!(
        out,
        "no webhook: namespace {} selected by no MutatingWebhookConfiguration",
        configs[0].namespace
    )
    .unwrap();
    writeln!(
        out,
        "baseline:   a constant AdmissionReview (the request's uid copied in) through webhook::server::serve, pid {}",
        configs[1].server_pid.unwrap_or(0)
    )
    .unwrap();
    writeln!(
        out,
        "webhook:    {} webhook, pid {}",
        env!("CARGO_BIN_EXE_linkerd-multus"),
        configs[2].server_pid.unwrap_or(0)
    )
    .unwrap();
    out
}
