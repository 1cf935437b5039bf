//! The webhook benchmark's report: the table of figures and the targets.

use crate::baseline::baseline_busy;
use crate::load::{Figures, Memory, Shape};
use crate::requests::Bodies;
use crate::{
    NAMESPACES, PATH, Plan, SERVERS, TARGET_P99_MS, TARGET_RATE, TARGET_RSS_MIB, TARGET_THROUGHPUT,
};

pub(crate) fn print_table(
    plan: &Plan,
    rows: &[(Shape, [Figures; SERVERS])],
    paired: &[f64],
    memory: &[Memory; SERVERS],
    handler_s: f64,
    bodies: &Bodies,
    pids: [u32; SERVERS],
) {
    print_setup(plan, bodies, pids);
    println!(
        "{:<22} {:<16} {:>9} {:>9} {:>6} {:>9} {:>6}",
        "load", "figure", "webhook", "baseline", "x", "reader", "xr"
    );
    let line = |load: &str, figure: &str, [w, b, r]: [f64; SERVERS], decimals: usize| {
        println!(
            "{load:<22} {figure:<16} {w:>9.decimals$} {b:>9.decimals$} {:>6.2} {r:>9.decimals$} {:>6.2}",
            w / b,
            w / r
        );
    };
    for (shape, f) in rows {
        let of = |figure: fn(&Figures) -> f64| f.each_ref().map(figure);
        line(&shape.label(), "p50 ms", of(|f| f.latency[0]), 3);
        line("", "p99 ms", of(|f| f.latency[1]), 3);
        line("", "p99.9 ms", of(|f| f.latency[2]), 3);
        line("", "req/s", of(|f| f.rate), 0);
        line("", "server CPU µs/req", of(|f| f.cpu_us), 1);
        line("", "load CPU µs/req", of(|f| f.client_cpu_us), 1);
    }
    line("after the load", "VmHWM MiB", memory.map(|m| m.hwm), 1);
    line("", "VmRSS MiB", memory.map(|m| m.rss), 1);
    let late = rows
        .iter()
        .filter(|(s, _)| matches!(s, Shape::Rate(..)))
        .flat_map(|(_, r)| r.iter().map(|f| f.pacer_p99_us))
        .fold(0.0, f64::max);
    println!(
        "(medians of {} round(s) of {:.0} s at fixed rates, {} of {:.1} s at saturation, the three servers alternating; x = webhook / baseline, xr = webhook / reader;",
        plan.rounds,
        plan.duration.as_secs_f64(),
        plan.saturation_rounds,
        plan.saturation_round().as_secs_f64()
    );
    println!(
        " fixed rates: latency from each request's scheduled time, the clock {late:.0} µs late at p99;"
    );
    println!(
        " CPU: user + system time per answer; webhook handler (parse, decide, answer) {:.1} µs a review)",
        handler_s * 1e6
    );

    print_targets(plan, rows, paired, memory);
}

/// Each target, met or not (not judged in a quick run).
fn print_targets(
    plan: &Plan,
    rows: &[(Shape, [Figures; SERVERS])],
    paired: &[f64],
    memory: &[Memory; SERVERS],
) {
    println!();
    let judged = |met: bool| match (plan.quick, met) {
        (true, _) => "not judged in a quick run",
        (false, true) => "met",
        (false, false) => "NOT met",
    };
    if let Some((_, [w, b, r])) = rows.iter().find(|(s, _)| matches!(s, Shape::Closed(_))) {
        // Judged on each round's ratio, the two measured back to back: the median of those.
        let share = crate::common::median(paired);
        let rounds: Vec<String> = paired
            .iter()
            .map(|p| format!("{:.0}%", p * 100.0))
            .collect();
        // How far this machine's noise leaves the median: what a change must beat to show.
        let interval = crate::common::median_interval(paired).map_or(String::new(), |(lo, hi)| {
            format!(
                ", 95% interval of the median {:.0}% to {:.0}%",
                lo * 100.0,
                hi * 100.0
            )
        });
        println!(
            "target: saturated throughput >= {:.0}% of the reader's: {:.0}%, the median of each round's ratio ({}{interval}; medians {:.0} / {:.0} req/s): {}",
            TARGET_THROUGHPUT * 100.0,
            share * 100.0,
            rounds.join(", "),
            w.rate,
            r.rate,
            judged(share >= TARGET_THROUGHPUT)
        );
        // Not a target: what reading the review costs by itself on this machine.
        println!(
            "reading alone: the reader at {:.0}% of the baseline's saturated throughput ({:.0} req/s), the webhook at {:.0}% of the baseline's",
            r.rate / b.rate * 100.0,
            b.rate,
            w.rate / b.rate * 100.0
        );
    }
    match rows
        .iter()
        .find(|(s, _)| matches!(s, Shape::Rate(r, _) if *r == TARGET_RATE))
    {
        Some((_, [w, b, _])) => println!(
            "target: p99 < {TARGET_P99_MS} ms at {TARGET_RATE:.0} req/s: {:.3} ms (baseline {:.3} ms): {}",
            w.latency[1],
            b.latency[1],
            judged(w.latency[1] < TARGET_P99_MS)
        ),
        None => println!("target: p99 at {TARGET_RATE:.0} req/s: not measured"),
    }
    let w = &memory[0];
    println!(
        "target: resident memory < {TARGET_RSS_MIB} MiB: peak {:.1} MiB, {:.1} MiB after the load: {}",
        w.hwm,
        w.rss,
        judged(w.hwm < TARGET_RSS_MIB)
    );
}

/// What was measured, and how.
fn print_setup(plan: &Plan, bodies: &Bodies, pids: [u32; SERVERS]) {
    println!();
    println!(
        "webhook:  {} webhook (pid {}), {NAMESPACES} namespaces cached",
        env!("CARGO_BIN_EXE_linkerd-multus"),
        pids[0]
    );
    let busy = baseline_busy();
    println!(
        "baseline: a constant AdmissionReview through webhook::server::serve: same TLS, HTTP, limits, runtime{} (pid {})",
        if busy.is_zero() {
            String::new()
        } else {
            format!(
                "; busy {} ns before each answer (BENCH_BASELINE_BUSY_NS)",
                busy.as_nanos()
            )
        },
        pids[1]
    );
    println!(
        "reader:   the baseline reading each review first, with the webhook's admission::parse (pid {})",
        pids[2]
    );
    println!(
        "load:     POST {PATH}, the captured pod-create review ({} bytes) rotated over the namespaces,",
        bodies.bytes
    );
    println!(
        "          TLS 1.3, HTTP/1.1 keep-alive, {} load generator thread(s) on the same {} CPUs",
        plan.client_threads,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}
