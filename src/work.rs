//! The work the pure core does on what users write, counted, and the one way it de-duplicates.
//!
//! Each loop over the parts of an input (the selections of a networks annotation, the entries
//! of a NAD's IPAM, the ranges a pod's networks bring, the entries merged into its
//! skip-subnets, the NADs its selections look up) counts one unit for each part it visits
//! ([`count`]). The count is per thread and no rule reads it: the property and fuzz targets
//! do ([`measure`]), and fail when the units for one input pass a bound linear in its bytes
//! (tests/work_property.rs, the `work` target of fuzz/), so that a loop nested in another
//! over the same input is found by a machine rather than by a tenant. [`Distinct`] keeps
//! values in first-seen order, each once, in time linear in their number: the rules use it
//! wherever they de-duplicate what a user wrote.

use std::cell::Cell;
use std::hash::{BuildHasher, Hash, RandomState};

use hashbrown::HashTable;
use smallvec::SmallVec;

thread_local! {
    static UNITS: Cell<u64> = const { Cell::new(0) };
}

/// Counts `units` of work on this thread.
#[inline]
pub fn count(units: usize) {
    UNITS.with(|u| u.set(u.get().saturating_add(units as u64)));
}

/// What `f` returns, and the units of work it counted on this thread.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = UNITS.with(Cell::get);
    let result = f();
    (result, UNITS.with(Cell::get).saturating_sub(before))
}

/// Up to this many values, a [`Distinct`] compares a new one with each it holds: no hashing
/// and no table for the few that most inputs bring (a pod selects a handful of networks).
const SCAN: usize = 8;

/// Values a [`Distinct`] holds without an allocation: most inputs bring one or two.
const INLINE: usize = 2;

/// Values in the order first given, each once: a list and, past `SCAN` values, a hash
/// table of their places in it, so that each [`Distinct::insert`] costs the same however
/// many it holds (one unit). Each value is stored once; up to `INLINE` in the list itself.
#[derive(Debug, Clone)]
pub struct Distinct<T> {
    order: SmallVec<[T; INLINE]>,
    /// The places in `order`, by the hash of the value there, once it holds more than
    /// [`SCAN`].
    index: Option<(HashTable<usize>, RandomState)>,
}

impl<T> Default for Distinct<T> {
    fn default() -> Self {
        Distinct {
            order: SmallVec::new(),
            index: None,
        }
    }
}

impl<T: Hash + Eq> Distinct<T> {
    /// Adds `value` unless it is held already; whether it was added.
    pub fn insert(&mut self, value: T) -> bool {
        count(1);
        if self.index.is_none() && self.order.len() >= SCAN {
            self.index = Some(index(&self.order));
        }
        let Some((table, state)) = &mut self.index else {
            if self.order.contains(&value) {
                return false;
            }
            self.order.push(value);
            return true;
        };
        let order = &self.order;
        let hash = state.hash_one(&value);
        if table.find(hash, |&i| order[i] == value).is_some() {
            return false;
        }
        table.insert_unique(hash, order.len(), |&i| state.hash_one(&order[i]));
        self.order.push(value);
        true
    }

    /// Whether `value` is held.
    pub fn contains(&self, value: &T) -> bool {
        count(1);
        match &self.index {
            None => self.order.contains(value),
            Some((table, state)) => table
                .find(state.hash_one(value), |&i| self.order[i] == *value)
                .is_some(),
        }
    }
}

impl<T> Distinct<T> {
    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The values in the order first given.
    pub fn as_slice(&self) -> &[T] {
        &self.order
    }

    /// The values in the order first given.
    pub fn into_vec(self) -> Vec<T> {
        self.order.into_vec()
    }

    /// The values in the order first given, up to `INLINE` without an allocation.
    pub fn into_list(self) -> SmallVec<[T; INLINE]> {
        self.order
    }
}

/// The table of the places of `values`, which are distinct.
fn index<T: Hash>(values: &[T]) -> (HashTable<usize>, RandomState) {
    let state = RandomState::new();
    let mut table = HashTable::with_capacity(values.len() * 2);
    for (i, value) in values.iter().enumerate() {
        table.insert_unique(state.hash_one(value), i, |&j| state.hash_one(&values[j]));
    }
    (table, state)
}

impl<T: Hash + Eq> FromIterator<T> for Distinct<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut distinct = Distinct::default();
        for value in iter {
            distinct.insert(value);
        }
        distinct
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_keeps_the_first_of_each_in_order() {
        for (given, kept) in [
            (&[][..], &[][..]),
            (&[3, 1, 3, 2, 1][..], &[3, 1, 2][..]),
            (&[5, 5, 5][..], &[5][..]),
            // Past the scanned few, through the table.
            (
                &[1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 10, 9, 2, 11, 12][..],
                &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12][..],
            ),
        ] {
            let distinct: Distinct<i32> = given.iter().copied().collect();
            assert_eq!(distinct.as_slice(), kept, "{given:?}");
            assert_eq!(distinct.len(), kept.len());
            for value in given {
                assert!(distinct.contains(value), "{value} in {given:?}");
            }
            assert!(!distinct.contains(&0), "0 in {given:?}");
        }
    }

    #[test]
    fn each_insert_is_one_unit_however_many_are_held() {
        for n in [10, 1_000, 100_000] {
            let (distinct, units) = measure(|| (0..n).chain(0..n).collect::<Distinct<_>>());
            assert_eq!(distinct.len(), n);
            assert_eq!(units, 2 * n as u64, "{n} values given twice");
        }
    }

    #[test]
    fn measure_counts_only_what_its_closure_counts() {
        count(7);
        let ((), inner) = measure(|| count(3));
        assert_eq!(inner, 3);
        let (((), nested), outer) = measure(|| measure(|| count(2)));
        assert_eq!((nested, outer), (2, 2));
    }
}
