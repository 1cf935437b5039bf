//! The tests' own apply-setters: what kpt's `apply-setters` function does to
//! the `# kpt-set:` comments of the shipped packages (no function image runs
//! here without a registry), for the deploy, extension and shipped tests.

/// `text` with every `# kpt-set:` line set to `setters`' values, as kpt's `apply-setters`
/// sets them: the value before the comment becomes the comment's pattern with each
/// `${name}` replaced. Panics on a setter `setters` does not give.
pub fn apply_setters(text: &str, setters: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let Some((before, pattern)) = line.split_once(" # kpt-set: ") else {
            out.push_str(line);
            continue;
        };
        let mut value = pattern.trim_end().to_string();
        for (name, to) in setters {
            value = value.replace(&format!("${{{name}}}"), to);
        }
        assert!(
            !value.contains("${"),
            "unknown setter in {line:?}: the package README documents {setters:?}"
        );
        let (key, _) = before
            .rsplit_once(' ')
            .expect("key or `-` before the value");
        out.push_str(&format!(
            "{key} {value} # kpt-set: {}",
            &line[line.find("# kpt-set: ").unwrap() + "# kpt-set: ".len()..]
        ));
    }
    out
}
