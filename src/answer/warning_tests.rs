use super::*;
use crate::vocabulary::failure::{Failure, FailureKind, Observed};
use crate::vocabulary::reference::ImageReference;
use crate::vocabulary::workload::{ContainerImage, ContainerList};

#[test]
fn what_fits_is_joined_unchanged() {
    let parts = [
        Part::Shrink {
            text: "abc",
            min: 1,
            rank: 0,
        },
        Part::Whole(": "),
        Part::Whole("cause"),
    ];
    assert_eq!(fit(&parts, 100), "abc: cause");
}

#[test]
fn the_last_shrinkable_part_gives_way_first_and_whole_parts_never_do() {
    let names = "n".repeat(40);
    let list = "l".repeat(40);
    let parts = [
        Part::Shrink {
            text: &names,
            min: 10,
            rank: 1,
        },
        Part::Whole(" CAUSE "),
        Part::Shrink {
            text: &list,
            min: 0,
            rank: 0,
        },
    ];
    // 87 bytes into 60: the list gives 27 and keeps 13 (12 and the cut mark)
    let text = fit(&parts, 60);
    assert!(text.len() <= 60, "{text}");
    assert!(text.starts_with(&format!("{names} CAUSE ")), "{text}");
    assert!(text.ends_with('…'), "{text}");
    // into 30: the list goes, the names shrink to what is left of their floor
    let text = fit(&parts, 30);
    assert!(text.len() <= 30 && text.contains(" CAUSE "), "{text}");
    assert!(!text.contains('l'), "{text}");
}

#[test]
fn whole_parts_beyond_the_limit_are_cut_at_the_end() {
    let cause = "c".repeat(300);
    let text = fit(&[Part::Whole("head "), Part::Whole(&cause)], WARNING_MAX);
    assert!(
        text.len() <= WARNING_MAX && text.starts_with("head c"),
        "{text}"
    );
}

fn finding(image: &str, failure: Failure) -> Finding {
    Finding::image(
        ContainerImage {
            list: ContainerList::Regular,
            name: "a".repeat(63),
            image: image.into(),
            pull_policy: None,
            pointer: "/spec/containers/0/image".into(),
        },
        ImageReference::parse(image).ok(),
        failure,
    )
}

#[test]
fn a_cause_stays_whole_before_the_lists_that_follow_it() {
    let image = format!("registry.example.com/team/{}:1", "b".repeat(170));
    let cause = "NeverVerify nodes start any pod from their copy";
    let nodes = format!("cached on 10 node(s) ({} and 7 more)", "n".repeat(190));
    let failure = Failure::caused(FailureKind::CachedOnNodes, Observed::AsKind, cause, &nodes);
    let warning = Warning::of(&finding(&image, failure));
    assert!(warning.cut);
    assert!(warning.text.len() <= WARNING_MAX, "{}", warning.text);
    assert!(
        warning
            .text
            .contains(&format!("allowed (actions.cachedOnNodes: warn): {cause}")),
        "{}",
        warning.text
    );
    assert!(warning.text.starts_with("container \""), "{}", warning.text);
}

#[test]
fn a_short_warning_is_whole_and_not_cut() {
    let failure = Failure::new(FailureKind::Unreachable, "connection refused");
    let warning = Warning::of(&finding("a.io/b:1", failure));
    assert!(!warning.cut);
    assert!(warning.text.ends_with(
        "registry unreachable on registry a.io; allowed (actions.unreachable: warn): connection refused"
    ), "{}", warning.text);
}
