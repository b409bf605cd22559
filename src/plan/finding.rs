//! A finding, a failure with its subject (a container's or a volume's image, or a pull
//! secret), and how it is worded: what the judge step produces and the answer step reports.

use crate::vocabulary::failure::{Failure, FailureKind, Observed};
use crate::vocabulary::reference::ImageReference;
use crate::vocabulary::text::truncate;
use crate::vocabulary::workload::ContainerImage;

/// Kubernetes may truncate warnings longer than this.
pub const WARNING_MAX: usize = 256;
/// Longest image string quoted as written: an image field can be arbitrarily long.
const IMAGE_QUOTE_MAX: usize = 200;

/// The locations asked besides the reference's own registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AlsoAsked {
    /// None: the registry alone.
    #[default]
    Nothing,
    /// Mirrors of the registry (`registries`).
    Mirrors,
    /// CRI-O's unqualified-search registries, in order, the reference's own first
    /// (`shortNames`), each with its mirrors.
    SearchRegistries(Vec<String>),
    /// Only the locations the nodes contact: a blocked rule (`registries`) refuses the
    /// others, the image's own registry among them.
    WithoutRefused {
        /// The locations asked, in order, as looked up.
        asked: Vec<String>,
        /// The prefixes of the blocked rules that refuse the others.
        refused: Vec<String>,
    },
}

/// `did you mean 1.25.5, 1.25.4 or 1.25-alpine?` for an absent image the lookup broker
/// suggested tags for (at most three, each a valid tag: `broker_reference::suggested_tags`).
fn did_you_mean(failure: &Failure) -> Option<String> {
    let tags = &failure.suggestions;
    if failure.kind != FailureKind::Absent || tags.is_empty() {
        return None;
    }
    let kept = &tags[..tags.len().min(broker_reference::suggested_tags::MAX_TAGS)];
    let listed = match kept {
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
        [] => return None,
    };
    Some(format!("did you mean {listed}?"))
}

/// What a finding is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A container's image.
    Image {
        /// The container and its image as written.
        container: ContainerImage,
        /// The parsed reference, absent when the image did not parse.
        reference: Option<ImageReference>,
        /// Which other locations were asked: the reason then names them with the registry.
        also_asked: AlsoAsked,
    },
    /// A pull secret, or the ServiceAccount that should list them.
    PullSecret {
        /// How to name it, e.g. `pull secret "team-a/regcred" (from ServiceAccount "default")`.
        description: String,
    },
}

/// One problem found in a request, with everything a message needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What the finding is about.
    pub subject: Subject,
    /// What went wrong.
    pub failure: Failure,
}

impl Finding {
    /// A finding about a container's image.
    pub fn image(
        container: ContainerImage,
        reference: Option<ImageReference>,
        failure: Failure,
    ) -> Self {
        Finding {
            subject: Subject::Image {
                container,
                reference,
                also_asked: AlsoAsked::Nothing,
            },
            failure,
        }
    }

    /// Marks an image finding as the result of a chain of locations, not of the registry alone.
    pub fn also_asked(mut self, asked: AlsoAsked) -> Self {
        if let Subject::Image { also_asked, .. } = &mut self.subject {
            *also_asked = asked;
        }
        self
    }

    /// The registry the finding is about, if any.
    pub(crate) fn reference(&self) -> Option<&ImageReference> {
        match &self.subject {
            Subject::Image { reference, .. } => reference.as_ref(),
            Subject::PullSecret { .. } => None,
        }
    }

    /// `container "app" image "ngnix:1" (docker.io/library/ngnix:1)`
    pub(crate) fn subject(&self, image_quote_max: usize) -> String {
        match &self.subject {
            Subject::Image {
                container,
                reference,
                ..
            } => {
                let image = truncate(&container.image, image_quote_max);
                match reference {
                    Some(reference) if reference.to_string() != container.image => {
                        format!("{container} image {image:?} ({reference})")
                    }
                    _ => format!("{container} image {image:?}"),
                }
            }
            Subject::PullSecret { description } => description.clone(),
        }
    }

    /// `not found on registry docker.io (did you mean 1.25.5 or 1.25-alpine?)` / `invalid
    /// image reference`: the suggestions right after the verdict, where a warning's first 256
    /// characters keep them.
    pub(crate) fn reason(&self) -> String {
        let (label, place) = self.reason_parts();
        format!("{label}{place}{}", self.suggestions())
    }

    /// ` (did you mean 1.25.5 or 1.25-alpine?)`, or empty: the tags the lookup broker found
    /// nearest the one asked, which a warning keeps whole.
    pub(crate) fn suggestions(&self) -> String {
        did_you_mean(&self.failure).map_or_else(String::new, |phrase| format!(" ({phrase})"))
    }

    /// The reason's label (`not found`) and where it was observed (` on registry docker.io`,
    /// empty when nowhere in particular), which a short warning may leave out.
    pub(crate) fn reason_parts(&self) -> (&'static str, String) {
        let also_asked = match &self.subject {
            Subject::Image { also_asked, .. } => also_asked,
            Subject::PullSecret { .. } => &AlsoAsked::Nothing,
        };
        let label = self.failure.label();
        let place = match (self.reference(), also_asked) {
            (Some(reference), AlsoAsked::Mirrors) => {
                format!(" on registry {} and its mirrors", reference.registry())
            }
            (Some(_), AlsoAsked::SearchRegistries(registries)) => {
                format!(" on search registries {}", registries.join(", "))
            }
            (Some(_), AlsoAsked::WithoutRefused { asked, refused }) => format!(
                " on {} (the nodes refuse pulls from {})",
                asked.join(", "),
                refused.join(", ")
            ),
            (Some(reference), AlsoAsked::Nothing) => {
                format!(" on registry {}", reference.registry())
            }
            (None, _) => String::new(),
        };
        (label, place)
    }

    /// What the user can do about it.
    fn hint(&self) -> String {
        let registry = self.reference().map_or("", ImageReference::registry);
        let name = self
            .reference()
            .map(ImageReference::name)
            .unwrap_or_default();
        match self.failure.observed {
            Observed::HostCannotParse => return format!(
                "the node may well pull it; to have it checked, reach {registry} by a DNS name or an IPv4 address, or exempt it with exemptImages"
            ),
            Observed::EmptyImage => return "set the image, or have the tool that fills it in do so before pods are created: the API server refuses a Pod without one".to_owned(),
            Observed::RefusedButCached => return format!(
                "pods placed on nodes without the image will fail, since the nodes never pull from {registry}: keep the pods on those nodes, or give the rule a mirror that has the image"
            ),
            Observed::Unrewritable => return "give the rule's location a path, or its prefix a parent of the image's repository: containers/image refuses a rewritten name that is not canonical".to_owned(),
            Observed::AsKind => {}
        }
        match self.failure.kind {
            FailureKind::Absent => match &self.subject {
                Subject::Image {
                    also_asked: AlsoAsked::WithoutRefused { asked, .. },
                    ..
                } => format!(
                    "the nodes pull it only from {}: check that the tag or digest was pushed there",
                    asked.join(", ")
                ),
                _ => format!(
                    "check that the tag or digest was pushed to {name} and is spelled correctly"
                ),
            },
            FailureKind::InvalidReference => "write the image as [registry/]repository[:tag][@digest] with a lowercase repository; the kubelet would report InvalidImageName".to_owned(),
            FailureKind::Unauthorized => format!(
                "if the image is private, make sure the pod has an imagePullSecret for {registry} and the policy can use it"
            ),
            FailureKind::Unreachable => format!(
                "{registry} could not be asked; the pull may still succeed, or fail the same way on the node"
            ),
            FailureKind::HostRefused => "grant the policy the host capabilities listed in its metadata".to_owned(),
            FailureKind::MissingPullSecret => "create it in the namespace, or remove it from imagePullSecrets".to_owned(),
            FailureKind::WrongPullSecretType | FailureKind::MalformedPullSecret => {
                "recreate it with `kubectl create secret docker-registry`".to_owned()
            }
            FailureKind::MissingPlatform => "build and push the image for the missing platforms (e.g. docker buildx build --platform), or keep the pods off them with a nodeSelector".to_owned(),
            FailureKind::CachedOnNodes => format!(
                "pods placed on nodes without the image will fail: push the tag or digest to {name} again, or pin the pods to those nodes"
            ),
            FailureKind::NotLookedUp => "add the registry to lookupRegistries to have it checked, or check the image yourself".to_owned(),
            FailureKind::UnresolvedShortName => "write the image with its registry (e.g. docker.io/library/nginx:1.25), or give the nodes an alias for it in registries.conf (and in shortNames.aliases)".to_owned(),
            FailureKind::BlockedRegistry => format!(
                "the nodes never pull from {registry}: copy the image to a mirror they pull from and list it in that rule's mirrors (on the nodes and in registries), or write the image from a registry they allow"
            ),
            FailureKind::UncoveredRegistry => format!(
                "add an imagePullSecret for {registry} to the pod or its ServiceAccount, or fix the image if it does not exist"
            ),
        }
    }

    /// A line of a rejection message.
    pub(crate) fn rejection_line(&self) -> String {
        format!(
            "- {}: {}: {}. Hint: {}.",
            self.subject(IMAGE_QUOTE_MAX),
            self.reason(),
            self.failure.detail,
            self.hint()
        )
    }

    /// The audit record of a failure that `allow` let through.
    pub(crate) fn audit_record(&self) -> String {
        format!(
            "{}: {}: {}",
            self.subject(IMAGE_QUOTE_MAX),
            self.reason(),
            self.failure.detail
        )
    }
}
