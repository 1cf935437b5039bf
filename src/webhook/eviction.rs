//! The order in which connections make room: for a new connection at `--max-connections` or
//! `--max-connections-per-peer`, and for a request at `--max-requests-per-peer`.
//!
//! A connection may go unless a request of it is being answered: one whose body is read whole
//! and whose review is being decided is never cut. Every other connection is waiting for its
//! caller (its first byte, its handshake, a request, the rest of a body) or for a cache's watch
//! (a review naming an object the webhook has not seen), which costs the caller one retry on
//! another connection, as the API server retries a reset call.
//!
//! Who goes first:
//!
//! 1. A connection that has had no review answered for objects that exist (unproven) goes
//!    before one that has (proven): the API server's keep-alive connections stay ahead of
//!    strangers, and a stranger cannot rank with them by asking about made-up namespaces.
//! 2. Then the peer holding the most connections: a flood from a few addresses evicts
//!    itself.
//! 3. Then, among unproven connections, the one that has owed its caller's bytes the longest,
//!    whatever it owes them for. A new connection has owed nothing for long, so a client that
//!    sends its request at once (the API server) outlives every connection opened before it
//!    that has not: at a peer's limit of N, N - 1 later connections must arrive before its own
//!    is chosen. Among proven connections, one waiting for a stalled body or a watch goes
//!    first, then an idle one (its client loses nothing but a reconnect), then one whose body
//!    is still arriving.
//! 4. Then the one unproductive the longest, then the oldest.
//!
//! And no connection goes before it has been unproductive for [`GRACE`]: a client that sends
//! its request at once has that long to do so, however fast others open connections beside it
//! (at a peer's limit of N, they can take its place at most N times in [`GRACE`]).

use std::cmp::Reverse;
use std::time::Duration;

use crate::webhook::metrics::Eviction;

/// How long a connection is kept, unproductive, before it may make room: ten times what a TLS
/// handshake and a request take a client in the cluster, a tenth of what a stranger's
/// connections must wait before the next may take their place.
pub const GRACE: Duration = Duration::from_millis(250);

/// What a connection is doing, as eviction weighs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doing {
    /// Not a byte yet.
    Silent,
    /// In its TLS handshake.
    Handshake,
    /// No request in flight: before its first, or between two.
    Idle,
    /// Every request in flight waits for its body; stalled once no byte has come for
    /// `--body-stall-timeout`.
    Reading {
        /// No byte for `--body-stall-timeout`.
        stalled: bool,
    },
    /// Every request in flight waits for its body or for a cache's watch, one at least for
    /// the watch.
    Waiting,
    /// A request in flight is being answered: never evicted.
    Working,
}

impl Doing {
    /// The metric label of a connection evicted while doing this.
    pub fn eviction(self) -> Eviction {
        match self {
            Doing::Silent | Doing::Handshake => Eviction::Handshake,
            Doing::Idle | Doing::Working => Eviction::Idle,
            Doing::Reading { stalled: true } => Eviction::Stalled,
            Doing::Reading { stalled: false } => Eviction::Reading,
            Doing::Waiting => Eviction::Waiting,
        }
    }
}

/// A candidate's place in the order of eviction, least first: proven, the
/// connections its peer holds (most first), its stage, how long it has been
/// unproductive (longest first), its id (oldest first).
type Rank = (bool, Reverse<usize>, u8, Reverse<Duration>, u64);

/// One connection as [`choose`] weighs it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    /// Its id in the registry: ids grow with age.
    pub id: u64,
    /// Whether it has had a review answered for objects that exist.
    pub proven: bool,
    /// What it is doing.
    pub doing: Doing,
    /// Connections its peer holds.
    pub peer_holds: usize,
    /// How long it has been unproductive: owing its caller's bytes, idle, or waiting.
    pub unproductive: Duration,
}

impl Candidate {
    /// Its place in the order of eviction, least first; `None` when it may not go: answering,
    /// or unproductive for less than `grace`.
    fn rank(&self, grace: Duration) -> Option<Rank> {
        if self.unproductive < grace {
            return None;
        }
        let stage = match (self.proven, self.doing) {
            (_, Doing::Working) => return None,
            (false, _) => 0,
            (true, Doing::Reading { stalled: true } | Doing::Waiting) => 0,
            (true, Doing::Silent | Doing::Handshake | Doing::Idle) => 1,
            (true, Doing::Reading { stalled: false }) => 2,
        };
        Some((
            self.proven,
            Reverse(self.peer_holds),
            stage,
            Reverse(self.unproductive),
            self.id,
        ))
    }
}

/// Of the candidates, the one to evict (see the module's order), among those unproductive for
/// `grace` at least ([`GRACE`]); `None` when none may go.
pub fn choose(candidates: impl Iterator<Item = Candidate>, grace: Duration) -> Option<Candidate> {
    candidates
        .filter_map(|c| Some((c.rank(grace)?, c)))
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_makes_room_first() {
        use Doing::*;
        const STALLED: Doing = Reading { stalled: true };
        const ARRIVING: Doing = Reading { stalled: false };
        // (proven, doing, connections its peer holds, ms unproductive)
        type Weighed = (bool, Doing, usize, u64);
        let c = |proven, doing, peer_holds, ms| (proven, doing, peer_holds, ms);
        // (the candidates, oldest first; the one chosen)
        let cases: Vec<(Vec<Weighed>, Option<u64>)> = vec![
            // A request being answered is never cut, whoever's.
            (vec![c(false, Working, 30, 9_000)], None),
            (vec![c(true, Working, 1, 9_000)], None),
            (vec![], None),
            // An unproven connection goes before a proven one, whatever each does.
            (
                vec![c(true, STALLED, 1, 9_000), c(false, ARRIVING, 1, 1)],
                Some(1),
            ),
            (
                vec![c(true, Idle, 1, 9_000), c(false, Silent, 1, 1)],
                Some(1),
            ),
            // Among unproven ones of one peer, the longest owing goes, whatever it owes:
            // a request head that came long ago before a handshake begun a moment ago.
            (
                vec![
                    c(false, ARRIVING, 2, 900),
                    c(false, Handshake, 2, 3),
                    c(false, Silent, 2, 1),
                ],
                Some(0),
            ),
            (
                vec![c(false, Silent, 2, 50), c(false, Waiting, 2, 400)],
                Some(1),
            ),
            // The peer holding the most goes first.
            (
                vec![c(false, Silent, 1, 4_000), c(false, ARRIVING, 30, 1)],
                Some(1),
            ),
            (vec![c(true, Idle, 1, 4_000), c(true, Idle, 3, 1)], Some(1)),
            // Among proven ones: a stalled body or a watch wait, then idle, then a body
            // still arriving.
            (
                vec![c(true, Idle, 2, 9_000), c(true, STALLED, 2, 1_000)],
                Some(1),
            ),
            (
                vec![c(true, Idle, 2, 9_000), c(true, Waiting, 2, 1)],
                Some(1),
            ),
            (
                vec![c(true, ARRIVING, 2, 9_000), c(true, Idle, 2, 1)],
                Some(1),
            ),
            (vec![c(true, ARRIVING, 2, 5)], Some(0)),
            // Then the longest unproductive, then the oldest.
            (vec![c(true, Idle, 2, 40), c(true, Idle, 2, 900)], Some(1)),
            (vec![c(false, Idle, 2, 10), c(false, Idle, 2, 10)], Some(0)),
        ];
        for (candidates, want) in cases {
            let chosen = choose(
                candidates
                    .iter()
                    .enumerate()
                    .map(|(id, &(proven, doing, peer_holds, ms))| Candidate {
                        id: id as u64,
                        proven,
                        doing,
                        peer_holds,
                        unproductive: Duration::from_millis(ms),
                    }),
                Duration::ZERO,
            );
            assert_eq!(chosen.map(|c| c.id), want, "{candidates:?}");
        }
    }

    #[test]
    fn each_doing_has_its_label() {
        for (doing, label) in [
            (Doing::Silent, Eviction::Handshake),
            (Doing::Handshake, Eviction::Handshake),
            (Doing::Idle, Eviction::Idle),
            (Doing::Reading { stalled: true }, Eviction::Stalled),
            (Doing::Reading { stalled: false }, Eviction::Reading),
            (Doing::Waiting, Eviction::Waiting),
        ] {
            assert_eq!(doing.eviction(), label, "{doing:?}");
        }
    }
}
