//! Warnings held to the [`WARNING_MAX`] bytes Kubernetes keeps of each, built so that what the
//! user must know survives the cut: the failure, the action that let it through and the
//! failure's documented cause are kept whole, while the names around them (container, image,
//! registry) and the lists after the cause (nodes, locations) shrink first; an absent image's
//! tag suggestions (at most three short names) stay whole beside the reason. The whole text
//! goes to the audit annotation ([`super::WARNINGS_ANNOTATION`]) when a warning is cut.
//!
//! [`fit`] is the rule for any bounded message: give it the parts in the order they are read,
//! the ones that must stay whole as [`Part::Whole`].

use crate::plan::finding::{Finding, WARNING_MAX};
use crate::vocabulary::text::truncate;

/// The fewest bytes a shrunk part keeps; below that it is left out.
const SHRUNK_MIN: usize = 8;

/// One part of a bounded message, in reading order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'a> {
    /// Kept whole: the cause, the action, the separators.
    Whole(&'a str),
    /// Cut with `…` when room runs out, down to `min` bytes (left out below a few bytes):
    /// names and lists. Parts of a lower `rank` give way first; of equal ranks, the last.
    Shrink {
        /// The text.
        text: &'a str,
        /// The fewest bytes it keeps.
        min: usize,
        /// Its order of giving way.
        rank: u8,
    },
    /// Kept whole, or left out when room runs out, in the order of giving way of `rank`.
    Optional {
        /// The text.
        text: &'a str,
        /// Its order of giving way, as a [`Part::Shrink`]'s.
        rank: u8,
    },
}

impl<'a> Part<'a> {
    fn text(&self) -> &'a str {
        match *self {
            Part::Whole(text) | Part::Shrink { text, .. } | Part::Optional { text, .. } => text,
        }
    }
}

/// `parts` joined within `max` bytes: the [`Part::Shrink`] parts, in their order of giving
/// way, give up what the message is over by, down to their minimum; what still does not fit
/// is cut from the end.
pub fn fit(parts: &[Part<'_>], max: usize) -> String {
    let mut kept: Vec<usize> = parts.iter().map(|part| part.text().len()).collect();
    let mut over = kept.iter().sum::<usize>().saturating_sub(max);
    let mut shrinking: Vec<(u8, usize)> = parts
        .iter()
        .enumerate()
        .filter_map(|(i, part)| match part {
            Part::Shrink { rank, .. } | Part::Optional { rank, .. } => {
                Some((*rank, usize::MAX - i))
            }
            Part::Whole(_) => None,
        })
        .collect();
    shrinking.sort_unstable();
    for (_, reversed) in shrinking {
        if over == 0 {
            break;
        }
        let i = usize::MAX - reversed;
        let given = match parts[i] {
            Part::Shrink { text, min, .. } => over.min(text.len() - min.min(text.len())),
            Part::Optional { text, .. } => text.len(),
            Part::Whole(_) => 0,
        };
        kept[i] -= given;
        over = over.saturating_sub(given);
    }
    let text: String = parts
        .iter()
        .zip(kept)
        .map(|(part, keep)| {
            let text = part.text();
            match part {
                Part::Optional { .. } if keep < text.len() => String::new(),
                Part::Shrink { .. } if keep < text.len() && keep < SHRUNK_MIN => String::new(),
                Part::Shrink { .. } if keep < text.len() => truncate(text, keep),
                _ => text.to_owned(),
            }
        })
        .collect();
    truncate(&text, max)
}

/// The warning of `finding`: `subject: reason; allowed (actions.KEY: warn): cause; rest`, at
/// most [`WARNING_MAX`] bytes, the cause and the action whole.
pub fn of(finding: &Finding) -> String {
    Warning::of(finding).text
}

/// A finding's warning, and whether it says less than the finding's audit record.
pub(super) struct Warning {
    pub(super) text: String,
    pub(super) cut: bool,
}

impl Warning {
    pub(super) fn of(finding: &Finding) -> Self {
        let subject = finding.subject(80);
        let (label, place) = finding.reason_parts();
        let suggestions = finding.suggestions();
        let allowed = format!(
            "; allowed (actions.{}: warn): ",
            finding.failure.kind.setting_key()
        );
        let (cause, rest) = finding.failure.cause_and_rest();
        let rest = match (cause.is_empty(), rest.is_empty()) {
            (false, false) => format!("; {rest}"),
            _ => rest.to_owned(),
        };
        // the lists after the cause give way first, then where it was seen (the image names
        // its registry), then the names
        let parts = [
            Part::Shrink {
                text: &subject,
                min: 12,
                rank: 2,
            },
            Part::Whole(": "),
            Part::Whole(label),
            Part::Optional {
                text: &place,
                rank: 1,
            },
            Part::Whole(&suggestions),
            Part::Whole(&allowed),
            Part::Whole(cause),
            Part::Shrink {
                text: &rest,
                min: 0,
                rank: 0,
            },
        ];
        let whole_len: usize = [
            &subject,
            label,
            &place,
            &suggestions,
            &allowed,
            cause,
            &rest,
        ]
        .iter()
        .map(|part| part.len())
        .sum::<usize>()
            + 2;
        Warning {
            text: fit(&parts, WARNING_MAX),
            cut: whole_len > WARNING_MAX || subject != finding.subject(usize::MAX),
        }
    }
}

#[cfg(test)]
#[path = "warning_tests.rs"]
mod tests;
