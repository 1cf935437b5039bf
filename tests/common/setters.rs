//! The tests' own apply-setters: what kpt's `apply-setters` function does to
//! the `# kpt-set:` comments of the shipped packages (no function image runs
//! here without a registry), for the deploy, extension and shipped tests.

/// `text` with every `# kpt-set:` line set to `setters`' values, as kpt's `apply-setters`
/// sets them: the value before the comment becomes the comment's pattern with each
/// `${name}` replaced; a key without a value before the comment is an array setter, whose
/// block sequence below gets the items of the value, written `[a, b]`. Panics on a setter
/// `setters` does not give.
pub fn apply_setters(text: &str, setters: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
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
        if before.trim_end().ends_with(':') {
            out.push_str(line);
            let items = value
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .unwrap_or_else(|| panic!("{line:?}: an array setter takes [a, b], not {value:?}"));
            let mut indent = before.len() - before.trim_start().len();
            while let Some(next) = lines.peek() {
                let at = next.len() - next.trim_start().len();
                if !next.trim_start().starts_with("- ") {
                    break;
                }
                indent = at;
                lines.next();
            }
            for item in items.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                out.push_str(&format!("{}- {item}\n", " ".repeat(indent)));
            }
            continue;
        }
        let (key, old) = split_value(before);
        // kpt keeps the style of the value it sets: a double-quoted one stays so.
        let value = match old.starts_with('"') {
            true => serde_json::to_string(&value).unwrap(),
            false => value,
        };
        out.push_str(&format!(
            "{key}{value} # kpt-set: {}",
            &line[line.find("# kpt-set: ").unwrap() + "# kpt-set: ".len()..]
        ));
    }
    out
}

/// `before` (a line up to its setter comment) split into what precedes the value
/// (indentation, `- `, `key: `) and the value, which may hold spaces of its own.
fn split_value(before: &str) -> (&str, &str) {
    let indent = before.len() - before.trim_start().len();
    let rest = &before[indent..];
    let item = if rest.starts_with("- ") { 2 } else { 0 };
    let after_dash = &rest[item..];
    let key = match after_dash.starts_with(['"', '\'']) {
        true => 0,
        false => after_dash.find(": ").map_or(0, |i| i + 2),
    };
    let at = indent + item + key;
    (&before[..at], before[at..].trim_end())
}
