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
use std::collections::HashSet;
use std::hash::Hash;

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

/// Values in the order first given, each once: a list beside a hash set of what it holds, so
/// that each [`Distinct::insert`] costs the same however many it holds (one unit).
#[derive(Debug, Clone)]
pub struct Distinct<T> {
    seen: HashSet<T>,
    order: Vec<T>,
}

impl<T> Default for Distinct<T> {
    fn default() -> Self {
        Distinct {
            seen: HashSet::new(),
            order: Vec::new(),
        }
    }
}

impl<T: Hash + Eq + Clone> Distinct<T> {
    /// Adds `value` unless it is held already; whether it was added.
    pub fn insert(&mut self, value: T) -> bool {
        count(1);
        if self.seen.contains(&value) {
            return false;
        }
        self.seen.insert(value.clone());
        self.order.push(value);
        true
    }

    /// Whether `value` is held.
    pub fn contains(&self, value: &T) -> bool {
        count(1);
        self.seen.contains(value)
    }

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
        self.order
    }
}

impl<T: Hash + Eq + Clone> FromIterator<T> for Distinct<T> {
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
        ] {
            let distinct: Distinct<i32> = given.iter().copied().collect();
            assert_eq!(distinct.as_slice(), kept, "{given:?}");
            assert_eq!(distinct.len(), kept.len());
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
