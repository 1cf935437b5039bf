//! Every relative link of the READMEs and `docs/*.md` resolves: files, and anchors made from headings.

use super::*;

/// Every relative Markdown link of the files whose snippets run (every README.md and
/// `docs/*.md`) names a file or folder that exists and, after `#`, a heading of that file (or of
/// the linking file itself), with GitHub's anchors: lower case, punctuation dropped, spaces as
/// hyphens, `-1`, `-2` for repeated headings. Links inside code are not links.
#[test]
fn every_link_resolves() {
    let root = repo_path(".");
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let markdown = std::fs::read_to_string(root.join(&doc)).unwrap();
        for (line, target) in links(&prose(&markdown)) {
            checked += 1;
            if let Err(why) = resolve(&root, &doc, &target) {
                broken.push(format!("{}:{line}: ({target}): {why}", doc.display()));
            }
        }
    }
    eprintln!("{checked} relative links checked");
    assert!(
        checked > 0,
        "no relative links found: the link reader is broken"
    );
    assert!(
        broken.is_empty(),
        "{} Markdown link(s) point at no file or no heading:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

/// The relative link targets of a text, each with its line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("](") {
        let rest = &text[at + 2..];
        let Some(end) = rest.find(')') else { continue };
        // `(path "title")`: the path is the first word.
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        let target = target.trim_start_matches('<').trim_end_matches('>');
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        out.push((text[..at].matches('\n').count() + 1, target.to_string()));
    }
    out
}

/// Whether a link of `doc` (relative to the repository `root`) names a file or folder, and
/// after `#` one of its headings: why not.
fn resolve(root: &Path, doc: &Path, target: &str) -> Result<(), String> {
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        root.join(doc)
    } else {
        root.join(doc.parent().unwrap()).join(path)
    };
    let shown = file
        .strip_prefix(root)
        .unwrap_or(&file)
        .display()
        .to_string();
    if !file.exists() {
        return Err(format!("no file or folder {shown}"));
    }
    if anchor.is_empty() {
        return Ok(());
    }
    let Ok(text) = std::fs::read_to_string(&file) else {
        return Err("an anchor into something that is not a file".to_string());
    };
    let known = anchors(&text);
    if known.contains(anchor) {
        return Ok(());
    }
    let known: Vec<_> = known.into_iter().collect();
    Err(format!(
        "no heading #{anchor} in {shown} (it has: {})",
        known.join(", ")
    ))
}

/// The text with fenced blocks and inline code blanked out, lines kept where they were.
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<String> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let ticks = trimmed.len() - trimmed.trim_start_matches('`').len();
        match &fence {
            Some(open) if trimmed.trim_end() == open.as_str() => fence = None,
            Some(_) => {}
            None if ticks >= 3 => fence = Some("`".repeat(ticks)),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    blank_inline_code(&out)
}

/// The text with each inline code span (a run of backticks up to the next run of the same
/// length) blanked out, its line breaks kept.
fn blank_inline_code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut kept = chars.clone();
    let run = |at: usize| chars[at..].iter().take_while(|&&c| c == '`').count();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = run(i);
        let mut j = i + n;
        let close = loop {
            match chars[j..].iter().position(|&c| c == '`') {
                None => break None,
                Some(k) if run(j + k) == n => break Some(j + k),
                Some(k) => j += k + run(j + k),
            }
        };
        let Some(close) = close else {
            i += n;
            continue;
        };
        for c in &mut kept[i..close + n] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = close + n;
    }
    kept.into_iter().collect()
}

/// GitHub's anchors of a file's headings.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut fenced = false;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let level = trimmed.len() - trimmed.trim_start_matches('#').len();
        if fenced || !(1..=6).contains(&level) || !trimmed[level..].starts_with(' ') {
            continue;
        }
        let slug = slug(&trimmed[level..]);
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// GitHub's anchor of a heading's text, a `[text](target)` in it counted as its text.
fn slug(heading: &str) -> String {
    let mut text = heading.trim().to_string();
    while let (Some(open), Some(mid)) = (text.find('['), text.find("](")) {
        let Some(close) = text[mid..].find(')') else {
            break;
        };
        text = format!(
            "{}{}{}",
            &text[..open],
            &text[open + 1..mid],
            &text[mid + close + 1..]
        );
    }
    text.chars()
        .filter_map(|c| match c {
            ' ' => Some("-".to_string()),
            '-' | '_' => Some(c.to_string()),
            c if c.is_alphanumeric() => Some(c.to_lowercase().collect()),
            _ => None,
        })
        .collect()
}
