//! Unified diffs of files as rendering would change them: what `check` and
//! `render --diff` print.

use std::collections::BTreeMap;

use similar::TextDiff;

/// Lines of context around each change, as `diff -u` and `git diff` use.
const CONTEXT: usize = 3;

/// The name a missing side of a diff gets.
const NO_FILE: &str = "/dev/null";

/// The text of each file before and after, by the path to show; `None` when
/// the file does not exist on that side.
pub type Files = BTreeMap<String, (Option<String>, Option<String>)>;

/// A unified diff of every file that changes, in path order, and how many do.
pub fn unified(files: &Files) -> (String, usize) {
    let mut out = String::new();
    let mut changed = 0;
    for (path, (before, after)) in files {
        if before == after {
            continue;
        }
        changed += 1;
        let old_label = match before {
            Some(_) => format!("a/{path}"),
            None => NO_FILE.to_string(),
        };
        let new_label = match after {
            Some(_) => format!("b/{path}"),
            None => NO_FILE.to_string(),
        };
        let before = before.as_deref().unwrap_or_default();
        let after = after.as_deref().unwrap_or_default();
        let diff = TextDiff::from_lines(before, after);
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(CONTEXT)
                .missing_newline_hint(true)
                .header(&old_label, &new_label)
                .to_string(),
        );
    }
    (out, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_changed_new_and_deleted_files() {
        let mut files = Files::new();
        files.insert("same.yaml".into(), (Some("a\n".into()), Some("a\n".into())));
        files.insert(
            "changed.yaml".into(),
            (Some("a\nb\n".into()), Some("a\nc\n".into())),
        );
        files.insert("new.yaml".into(), (None, Some("x\n".into())));
        files.insert("gone.yaml".into(), (Some("y\n".into()), None));
        let (text, changed) = unified(&files);
        assert_eq!(changed, 3);
        assert_eq!(
            text,
            "--- a/changed.yaml\n+++ b/changed.yaml\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\
             --- a/gone.yaml\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n\
             --- /dev/null\n+++ b/new.yaml\n@@ -0,0 +1 @@\n+x\n"
        );
    }
}
