//! The event aggregator, step by step: what each occurrence writes.

use super::*;

fn key(name: &str, reason: &'static str) -> Key {
    Key {
        object_kind: "Namespace".into(),
        namespace: None,
        name: name.into(),
        uid: Some(format!("uid-{name}")),
        kind: Kind::Warning,
        reason,
    }
}

fn wall(second: i64) -> Timestamp {
    Timestamp::from_second(1_000_000 + second).unwrap()
}

/// What one occurrence or flush at `at` seconds wrote, as a short word.
fn word(write: &Write) -> String {
    match write {
        Write::Create { .. } => "create".into(),
        Write::Series { count, .. } => format!("series {count}"),
    }
}

#[test]
fn repeats_fold_into_one_series_written_at_most_every_minute() {
    let t0 = Instant::now();
    let mut aggregator = Aggregator::new(MAX_SERIES);
    let a = key("a", "NADFailed");
    // (seconds, "record" an occurrence or "flush", what is written)
    let steps: &[(u64, &str, &[&str])] = &[
        (0, "record", &["create"]),
        (1, "record", &[]),
        (3, "record", &[]),
        (30, "flush", &[]),
        (60, "flush", &["series 3"]),
        (61, "record", &[]),
        (90, "flush", &[]),
        (121, "record", &["series 5"]),
        (200, "flush", &[]),
        // Seen no more for 6 minutes: the series ends, nothing left to write.
        (121 + 360, "flush", &[]),
        // A later occurrence starts a new Event.
        (500, "record", &["create"]),
        (501, "record", &[]),
        // Ended with a count unwritten: its last count is written.
        (501 + 360, "flush", &["series 2"]),
    ];
    for (at, what, want) in steps {
        let now = t0 + Duration::from_secs(*at);
        let writes: Vec<Write> = match *what {
            "record" => aggregator
                .record(a.clone(), now, wall(*at as i64))
                .into_iter()
                .collect(),
            _ => aggregator.due(now),
        };
        let got: Vec<String> = writes.iter().map(word).collect();
        assert_eq!(got, *want, "{what} at {at} s");
    }
    assert!(aggregator.is_empty(), "ended series are forgotten");
}

#[test]
fn series_are_per_object_type_and_reason_and_name_their_event() {
    let t0 = Instant::now();
    let mut aggregator = Aggregator::new(MAX_SERIES);
    let mut created = Vec::new();
    for k in [
        key("a", "NADFailed"),
        key("b", "NADFailed"),
        key("a", "NADExists"),
        Key {
            kind: Kind::Normal,
            ..key("a", "NADFailed")
        },
    ] {
        match aggregator.record(k, t0, wall(0)) {
            Some(Write::Create { event }) => created.push(event),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(created.len(), 4);
    assert!(created[0].starts_with("a."));
    assert!(created[1].starts_with("b."));
    let later = t0 + SERIES_UPDATE;
    let write = aggregator.record(key("a", "NADFailed"), later, wall(60));
    assert_eq!(
        write,
        Some(Write::Series {
            event: created[0].clone(),
            namespace: "default".into(),
            count: 2,
            last_seen: wall(60),
        }),
        "a cluster-scoped object's Events are in default"
    );
}

#[test]
fn the_cache_is_bounded_and_forgets_the_least_recent_first() {
    let t0 = Instant::now();
    let mut aggregator = Aggregator::new(3);
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        aggregator.record(key(name, "R"), t0 + Duration::from_secs(i as u64), wall(0));
    }
    // "a" seen again: "b" is now the least recent.
    assert_eq!(
        aggregator.record(key("a", "R"), t0 + Duration::from_secs(5), wall(5)),
        None
    );
    aggregator.record(key("d", "R"), t0 + Duration::from_secs(6), wall(6));
    assert_eq!(aggregator.len(), 3);
    let again = aggregator.record(key("b", "R"), t0 + Duration::from_secs(7), wall(7));
    assert!(
        matches!(again, Some(Write::Create { .. })),
        "b was forgotten"
    );
    assert_eq!(aggregator.len(), 3);
    // 10,000 namespaces failing at once: never more than the bound.
    let mut big = Aggregator::new(MAX_SERIES);
    for i in 0..10_000 {
        big.record(key(&format!("ns-{i}"), "NADFailed"), t0, wall(0));
    }
    assert_eq!(big.len(), MAX_SERIES);
}

#[test]
fn a_series_whose_event_is_gone_starts_again() {
    let t0 = Instant::now();
    let mut aggregator = Aggregator::new(MAX_SERIES);
    let Some(Write::Create { event }) = aggregator.record(key("a", "R"), t0, wall(0)) else {
        panic!("created first");
    };
    aggregator.forget(&event);
    assert!(matches!(
        aggregator.record(key("a", "R"), t0 + Duration::from_secs(1), wall(1)),
        Some(Write::Create { .. })
    ));
}

#[test]
fn notes_are_cut_to_what_the_api_server_accepts() {
    assert_eq!(truncate("short".into(), 1024), "short");
    let long = truncate("é".repeat(600), 1024);
    assert!(long.len() <= 1024 && long.ends_with('…'), "{}", long.len());
}
