//! What `check` found, and the two forms it prints: `linkerd check`'s table
//! and the JSON that `linkerd check` asks every extension for (EXTENSIONS.md).

use serde::Serialize;

/// The checks run, by category, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The categories, each with its checks.
    pub categories: Vec<Category>,
}

/// One category of checks: a heading in the table, `categoryName` in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Category {
    /// The category's name (`linkerd-multus`, `linkerd-multus-cni`, ...).
    #[serde(rename = "categoryName")]
    pub name: String,
    /// Its checks.
    pub checks: Vec<Check>,
}

/// One check and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What is checked, said as what holds when it passes.
    pub description: String,
    /// What to do about a warning or an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// What is wrong, naming the objects; none on success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How it came out.
    pub result: Outcome,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It holds.
    Success,
    /// It does not hold, and the extension still works: `‼`, exit 0.
    Warning,
    /// It does not hold: `×`, exit 1.
    Error,
}

impl Check {
    /// A check that holds.
    pub fn success(description: impl Into<String>) -> Self {
        Check {
            description: description.into(),
            hint: None,
            error: None,
            result: Outcome::Success,
        }
    }

    /// A check that failed: what is wrong and what to do.
    pub fn error(
        description: impl Into<String>,
        error: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Check {
            description: description.into(),
            hint: Some(hint.into()),
            error: Some(error.into()),
            result: Outcome::Error,
        }
    }

    /// A check that warns: what is wrong and what to do.
    pub fn warning(
        description: impl Into<String>,
        error: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Check {
            result: Outcome::Warning,
            ..Check::error(description, error, hint)
        }
    }
}

impl Report {
    /// Whether no check failed (warnings do not fail).
    pub fn success(&self) -> bool {
        self.categories
            .iter()
            .flat_map(|c| &c.checks)
            .all(|c| c.result != Outcome::Error)
    }

    /// The exit code: 0 when no check failed, 1 otherwise.
    pub fn code(&self) -> i32 {
        if self.success() { 0 } else { 1 }
    }

    /// `linkerd check`'s table: each category under its underlined name, a
    /// `√`, `‼` or `×` line per check with the error and the hint indented
    /// below, and the status line last. Linkerd's hints are links (`see URL
    /// for hints`); these say the fix, so they read `hint: ...`. Text from
    /// the cluster may hold control characters (a terminal's escape
    /// sequences, a carriage return over a line): each is printed escaped
    /// ([`printable`]), the line breaks of an error but kept, each line indented.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for category in &self.categories {
            let name = printable(&category.name);
            out.push_str(&name);
            out.push('\n');
            out.push_str(&"-".repeat(name.chars().count()));
            out.push('\n');
            for check in &category.checks {
                let mark = match check.result {
                    Outcome::Success => "√",
                    Outcome::Warning => "‼",
                    Outcome::Error => "×",
                };
                out.push_str(&format!("{mark} {}\n", printable(&check.description)));
                for line in check.error.iter().flat_map(|e| e.split('\n')) {
                    out.push_str(&format!("    {}\n", printable(line)));
                }
                if let Some(hint) = &check.hint {
                    out.push_str(&format!("    hint: {}\n", printable(hint)));
                }
            }
            out.push('\n');
        }
        let mark = if self.success() { "√" } else { "×" };
        out.push_str(&format!("Status check results are {mark}\n"));
        out
    }

    /// The JSON of EXTENSIONS.md: `success` and the categories.
    pub fn json(&self) -> String {
        #[derive(Serialize)]
        struct Json<'a> {
            success: bool,
            categories: &'a [Category],
        }
        let json = Json {
            success: self.success(),
            categories: &self.categories,
        };
        let mut text = serde_json::to_string_pretty(&json).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// `text` with every control character escaped as Rust writes it (`\u{1b}`,
/// `\r`, `\t`), and the bidirectional formatting characters that reorder
/// what a terminal shows: nothing in it acts on the terminal.
pub fn printable(text: &str) -> String {
    let acts = |c: char| {
        c.is_control()
            || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(acts) {
        return text.to_string();
    }
    text.chars()
        .map(|c| match acts(c) {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            categories: vec![Category {
                name: "linkerd-multus".into(),
                checks: vec![
                    Check::success("linkerd-multus Namespace exists"),
                    Check::warning(
                        "the serving certificate is valid for 60 days or more",
                        "linkerd-multus/linkerd-multus-webhook-tls expires in 12 days",
                        "run linkerd multus install | kubectl apply --server-side --field-manager=linkerd-multus-install -f -",
                    ),
                ],
            }],
        }
    }

    #[test]
    fn the_table_is_linkerd_checks() {
        let mut r = report();
        assert_eq!(
            r.table(),
            "linkerd-multus\n--------------\n√ linkerd-multus Namespace exists\n\
             ‼ the serving certificate is valid for 60 days or more\n\
             \x20   linkerd-multus/linkerd-multus-webhook-tls expires in 12 days\n\
             \x20   hint: run linkerd multus install | kubectl apply --server-side --field-manager=linkerd-multus-install -f -\n\n\
             Status check results are √\n"
        );
        assert_eq!(r.code(), 0);
        r.categories[0].checks.push(Check::error("x", "y", "z"));
        assert!(r.table().ends_with("Status check results are ×\n"));
        assert_eq!(r.code(), 1);
    }

    #[test]
    fn control_characters_are_escaped_in_the_table() {
        for (text, want) in [
            ("plain text, ünïcode ✓", "plain text, ünïcode ✓"),
            ("\u{1b}[2J\u{1b}[31mred", "\\u{1b}[2J\\u{1b}[31mred"),
            ("over\rwrite", "over\\rwrite"),
            ("tab\there", "tab\\there"),
            ("bell\u{7}", "bell\\u{7}"),
            ("c1\u{9b}31m", "c1\\u{9b}31m"),
            ("abc\u{202e}fed", "abc\\u{202e}fed"),
            ("line\nbreak", "line\\nbreak"),
        ] {
            assert_eq!(printable(text), want, "{text:?}");
        }
        let report = Report {
            categories: vec![Category {
                name: "linkerd-multus".into(),
                checks: vec![Check::error(
                    "x\u{1b}]0;title\u{7}",
                    "first\r\u{1b}[1A√ forged\nsecond",
                    "do\u{1b}[8m this",
                )],
            }],
        };
        assert_eq!(
            report.table(),
            "linkerd-multus\n--------------\n× x\\u{1b}]0;title\\u{7}\n\
             \x20   first\\r\\u{1b}[1A√ forged\n\
             \x20   second\n\
             \x20   hint: do\\u{1b}[8m this\n\n\
             Status check results are ×\n"
        );
        let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
        assert_eq!(
            json["categories"][0]["checks"][0]["hint"], "do\u{1b}[8m this",
            "JSON keeps the text: its readers escape it"
        );
    }

    #[test]
    fn the_json_is_the_extension_schema() {
        let json: serde_json::Value = serde_json::from_str(&report().json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "success": true,
                "categories": [{
                    "categoryName": "linkerd-multus",
                    "checks": [
                        {"description": "linkerd-multus Namespace exists", "result": "success"},
                        {
                            "description": "the serving certificate is valid for 60 days or more",
                            "hint": "run linkerd multus install | kubectl apply --server-side --field-manager=linkerd-multus-install -f -",
                            "error": "linkerd-multus/linkerd-multus-webhook-tls expires in 12 days",
                            "result": "warning"
                        }
                    ]
                }]
            })
        );
    }
}
