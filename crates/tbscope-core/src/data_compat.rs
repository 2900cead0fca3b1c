//! Which kind a series is: legacy summary fields and plugin names mapped to tbscope's kinds.
//!
//! TensorBoard decides a series' kind from its first metadata, after migrating legacy fields
//! (`simple_value`, `histo`, `image`, `audio`) to their plugins (`data_compat.py`,
//! `data_compat.rs`). tbscope keeps that rule but sorts into eight user-facing kinds.

use crate::proto::{Metadata, ValueKind};

/// Plugin names as they appear on disk (`tensorboard/plugins/*/metadata.py`).
pub mod plugin_names {
    pub const SCALARS: &str = "scalars";
    pub const HISTOGRAMS: &str = "histograms";
    pub const IMAGES: &str = "images";
    pub const AUDIO: &str = "audio";
    pub const TEXT: &str = "text";
    pub const HPARAMS: &str = "hparams";
    pub const GRAPHS: &str = "graphs";
    pub const GRAPH_RUN_METADATA: &str = "graph_run_metadata";
    pub const GRAPH_RUN_METADATA_GRAPH: &str = "graph_run_metadata_graph";
    pub const GRAPH_KERAS_MODEL: &str = "graph_keras_model";
    pub const GRAPH_TAGGED_RUN_METADATA: &str = "graph_tagged_run_metadata";
}

/// The table a series lands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    Scalars = 0,
    Histograms = 1,
    Images = 2,
    Audio = 3,
    Text = 4,
    Hparams = 5,
    Blobs = 6,
    Tensors = 7,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Scalars,
        Kind::Histograms,
        Kind::Images,
        Kind::Audio,
        Kind::Text,
        Kind::Hparams,
        Kind::Blobs,
        Kind::Tensors,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Scalars => "scalars",
            Kind::Histograms => "histograms",
            Kind::Images => "images",
            Kind::Audio => "audio",
            Kind::Text => "text",
            Kind::Hparams => "hparams",
            Kind::Blobs => "blobs",
            Kind::Tensors => "tensors",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind a plugin's tensor summaries belong to.
    pub fn of_plugin(plugin: &[u8]) -> Kind {
        use plugin_names::*;
        match std::str::from_utf8(plugin).unwrap_or("") {
            SCALARS => Kind::Scalars,
            HISTOGRAMS => Kind::Histograms,
            IMAGES => Kind::Images,
            AUDIO => Kind::Audio,
            TEXT => Kind::Text,
            HPARAMS => Kind::Hparams,
            GRAPHS
            | GRAPH_RUN_METADATA
            | GRAPH_RUN_METADATA_GRAPH
            | GRAPH_KERAS_MODEL
            | GRAPH_TAGGED_RUN_METADATA => Kind::Blobs,
            _ => Kind::Tensors,
        }
    }
}

/// A set of kinds as a bitmask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindSet(pub u8);

impl KindSet {
    pub const ALL: KindSet = KindSet(0xff);
    #[inline]
    pub fn contains(self, k: Kind) -> bool {
        self.0 & (1 << k as u8) != 0
    }
    pub fn of(kinds: &[Kind]) -> KindSet {
        KindSet(kinds.iter().fold(0, |m, &k| m | (1 << k as u8)))
    }
}

/// The kind a value decides for its series, or `None` when it cannot decide (a tensor with no
/// metadata: a later value, or an earlier file, may carry the plugin name).
///
/// Legacy fields decide by themselves, as in TensorBoard's Rust loader; otherwise the plugin.
pub fn decide(value: &ValueKind<'_>, metadata: Option<&Metadata<'_>>) -> Option<Kind> {
    match value {
        ValueKind::Simple(_) => Some(Kind::Scalars),
        ValueKind::Histo(_) => Some(Kind::Histograms),
        ValueKind::Image(_) => Some(Kind::Images),
        ValueKind::Audio(_) => Some(Kind::Audio),
        ValueKind::Tensor(_) | ValueKind::Nothing | ValueKind::ObsoleteHisto => {
            metadata.map(|m| Kind::of_plugin(m.plugin_name))
        }
    }
}

/// The plugin name a legacy value migrates to.
pub fn legacy_plugin(value: &ValueKind<'_>) -> Option<&'static str> {
    match value {
        ValueKind::Simple(_) => Some(plugin_names::SCALARS),
        ValueKind::Histo(_) => Some(plugin_names::HISTOGRAMS),
        ValueKind::Image(_) => Some(plugin_names::IMAGES),
        ValueKind::Audio(_) => Some(plugin_names::AUDIO),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_fields_win_over_metadata() {
        let md = Metadata {
            plugin_name: b"text",
            ..Default::default()
        };
        assert_eq!(
            decide(&ValueKind::Simple(1.0), Some(&md)),
            Some(Kind::Scalars)
        );
        assert_eq!(decide(&ValueKind::Tensor(b""), Some(&md)), Some(Kind::Text));
        assert_eq!(decide(&ValueKind::Tensor(b""), None), None);
    }

    #[test]
    fn plugin_mapping() {
        assert_eq!(Kind::of_plugin(b"graph_keras_model"), Kind::Blobs);
        assert_eq!(Kind::of_plugin(b"pr_curves"), Kind::Tensors);
        assert_eq!(Kind::of_plugin(b""), Kind::Tensors);
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
        }
        let s = KindSet::of(&[Kind::Scalars, Kind::Text]);
        assert!(s.contains(Kind::Text) && !s.contains(Kind::Images));
    }
}
