//! The election's decisions, table by table: acquire, renew, expire, and the
//! time of observation.

use super::*;

const ME: &str = "replica-a";
const OTHER: &str = "replica-b";

fn timing() -> Timing {
    Timing::for_lease(Duration::from_secs(15))
}

fn lease(holder: &str, duration: i32, transitions: i32, renewed: i64) -> Lease {
    let mut lease = Lease::default();
    Record {
        holder: holder.to_string(),
        duration_seconds: duration,
        acquire_time: Some(Timestamp::from_second(1_000).unwrap()),
        renew_time: Some(Timestamp::from_second(renewed).unwrap()),
        transitions,
    }
    .write_into(&mut lease);
    lease
}

fn wall() -> Timestamp {
    Timestamp::from_second(5_000).unwrap()
}

#[test]
fn periods_follow_the_lease_as_client_go_s_defaults() {
    assert_eq!(
        Timing::for_lease(Duration::from_secs(15)),
        Timing {
            lease: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry: Duration::from_secs(2),
        }
    );
    let short = Timing::for_lease(Duration::from_secs(3));
    assert_eq!(short.renew_deadline, Duration::from_secs(2));
    assert_eq!(short.retry, Duration::from_millis(400));
    // client-go's rule: the deadline is past 1.2 retries and short of the lease.
    for seconds in [3, 6, 15, 60] {
        let t = Timing::for_lease(Duration::from_secs(seconds));
        assert!(t.renew_deadline < t.lease && t.renew_deadline > t.retry.mul_f64(1.2));
    }
}

#[test]
fn decisions() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let observed = |lease: Lease, seen: Duration| Observed {
        record: Record::of(&lease),
        lease,
        at: t0 + seen,
    };
    // (what was observed and when, now, the step)
    let took = |transitions, acquired: Option<Timestamp>| {
        Step::Take(Record {
            holder: ME.into(),
            duration_seconds: 15,
            acquire_time: acquired,
            renew_time: Some(wall()),
            transitions,
        })
    };
    let kept = Some(Timestamp::from_second(1_000).unwrap());
    for (what, seen, now, want) in [
        (
            "another's, not expired: wait",
            observed(lease(OTHER, 15, 3, 10), s(0)),
            s(14),
            Step::Wait {
                holder: OTHER.into(),
                left: s(1),
            },
        ),
        (
            "another's, expired by this clock: take it over",
            observed(lease(OTHER, 15, 3, 10), s(0)),
            s(15),
            took(4, Some(wall())),
        ),
        (
            "another's, with its own duration: 3 s",
            observed(lease(OTHER, 3, 3, 10), s(10)),
            s(13),
            took(4, Some(wall())),
        ),
        (
            "released: take it at once",
            observed(lease("", 1, 3, 10), s(0)),
            s(0),
            took(4, Some(wall())),
        ),
        (
            "its own: renew, keeping the acquire time and transitions",
            observed(lease(ME, 15, 3, 10), s(0)),
            s(5),
            took(3, kept),
        ),
        (
            "its own, expired (a restart with the same identity): renew",
            observed(lease(ME, 15, 3, 10), s(0)),
            s(60),
            took(3, kept),
        ),
    ] {
        assert_eq!(
            decide(ME, &seen, &timing(), t0 + now, wall()),
            want,
            "{what}"
        );
    }
}

#[test]
fn expiry_counts_from_when_the_record_was_observed_to_change() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    // The renewTime written in it says nothing: a record renewed "long ago"
    // by another node's clock still holds for the full duration from here.
    let first = observe(None, lease(OTHER, 15, 1, 10), t0);
    assert_eq!(first.at, t0);
    // Read again unchanged: the time of observation stays.
    let same = observe(Some(first.clone()), lease(OTHER, 15, 1, 10), t0 + s(10));
    assert_eq!(same.at, t0);
    assert!(matches!(
        decide(ME, &same, &timing(), t0 + s(14), wall()),
        Step::Wait { .. }
    ));
    assert!(matches!(
        decide(ME, &same, &timing(), t0 + s(15), wall()),
        Step::Take(_)
    ));
    // Renewed (its renewTime changed, even to an earlier time): observed anew.
    let renewed = observe(Some(same), lease(OTHER, 15, 1, 9), t0 + s(12));
    assert_eq!(renewed.at, t0 + s(12));
    assert_eq!(
        decide(ME, &renewed, &timing(), t0 + s(20), wall()),
        Step::Wait {
            holder: OTHER.into(),
            left: s(7),
        }
    );
    // Taken over by a third replica: observed anew too.
    let taken = observe(Some(renewed), lease("replica-c", 15, 2, 9), t0 + s(25));
    assert_eq!(taken.at, t0 + s(25));
}

#[test]
fn a_release_clears_the_holder_and_keeps_the_transitions() {
    let record = Record::of(&lease(ME, 15, 3, 10));
    let released = record.released(wall());
    assert_eq!(
        released,
        Record {
            holder: String::new(),
            duration_seconds: 1,
            acquire_time: Some(wall()),
            renew_time: Some(wall()),
            transitions: 3,
        }
    );
    let mut lease = lease(ME, 15, 3, 10);
    released.write_into(&mut lease);
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some(""),
        "an empty holder, as client-go writes it"
    );
}

#[tokio::test(start_paused = true)]
async fn the_fence_closes_at_the_end_of_the_term() {
    let (term, rx) = watch::channel(None);
    let fence = Fence(rx);
    assert_eq!(fence.until(), None, "not leading");
    let until = Instant::now() + Duration::from_secs(10);
    term.send_replace(Some(until));
    assert_eq!(fence.until(), Some(until));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(fence.until(), None, "the renew deadline passed");
    term.send_replace(Some(Instant::now() + Duration::from_secs(10)));
    assert!(fence.until().is_some(), "renewed");
    term.send_replace(None);
    assert_eq!(fence.until(), None, "lost");
}

/// A write the other candidate won (409) means "not acquired", not an
/// error; any other refusal stays an error.
#[test]
fn a_write_another_candidate_won_is_not_an_error() {
    let refused = |code: u16| {
        let status = kube::core::Status::failure("refused", "Reason").with_code(code);
        Err(CallError::Api(kube::Error::Api(Box::new(status))))
    };
    for (written, want) in [
        (Ok(()), Some(true)),
        (refused(409), Some(false)),
        (refused(403), None),
        (refused(500), None),
        (Err(CallError::Timeout(Duration::from_secs(1))), None),
    ] {
        assert_eq!(lost_race(written).ok(), want);
    }
}
