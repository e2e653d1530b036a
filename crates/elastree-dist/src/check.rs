//! The whole-index invariant check, run from the client: every sub-tree's nodes are exported
//! by `et_export` (one round trip per sub-tree) and walked here, and the top is checked
//! against the sub-tree roots: the first entry starts at minus infinity, each root's fences
//! are its entry's low fence and the next entry's, and each tag's entry count is the sum of
//! its sub-trees'.

use std::collections::{BTreeMap, HashMap};

use redis::Value;

use crate::codec;
use crate::error::DistError;
use crate::index::DistIndex;
use crate::node::{NodeView, Stored};

/// Checks `index`; call it while no writer runs.
pub(crate) fn check(index: &DistIndex) -> Result<(), DistError> {
    let deadline = index.deadline();
    index.refresh_top(deadline)?;
    let top = index.cached_top();
    let Some(first) = top.entries.first() else {
        return Err(DistError::Corrupt("the index has no sub-tree".into()));
    };
    if !first.lo.is_empty() {
        return Err(DistError::Corrupt(
            "the first sub-tree does not start at minus infinity".into(),
        ));
    }
    let cap = index.options.node_capacity;
    let mut per_token: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, entry) in top.entries.iter().enumerate() {
        let name = format!("sub-tree {}:{} (entry {i})", entry.token, entry.id);
        let id = codec::root_arg(entry.id);
        let reply = index.call_tag("et_export", entry.token, &[&id[..]], false, deadline)?;
        let nodes =
            exported_nodes(&reply).map_err(|e| DistError::Corrupt(format!("{name}: {e}")))?;
        let high = top.entries.get(i + 1).map(|next| next.lo.as_slice());
        let count = check_subtree(&nodes, entry.id, &entry.lo, high, cap)
            .map_err(|e| DistError::Corrupt(format!("{name}: {e}")))?;
        *per_token.entry(entry.token).or_default() += count;
    }
    for (token, expected) in per_token {
        let stored = codec::int(&index.call_tag("et_tag_count", token, &[], false, deadline)?)?;
        if stored != expected as i64 {
            return Err(DistError::Corrupt(format!(
                "tag {token} counts {stored} entries but its sub-trees hold {expected}"
            )));
        }
    }
    Ok(())
}

/// The `{OK, count, id1, bytes1, ...}` reply of `et_export` as id -> bytes.
fn exported_nodes(reply: &Value) -> Result<HashMap<u64, Vec<u8>>, String> {
    let Value::Array(parts) = reply else {
        return Err(format!("et_export answered {reply:?}"));
    };
    let status = parts.first().and_then(|v| codec::bytes_of(v).ok());
    if status.as_deref() != Some(b"OK") {
        return Err(format!(
            "not a sub-tree root ({})",
            String::from_utf8_lossy(&status.unwrap_or_default())
        ));
    }
    let mut nodes = HashMap::new();
    for pair in parts.get(2..).unwrap_or_default().chunks(2) {
        let [id, bytes] = pair else {
            return Err("odd export".into());
        };
        let id = codec::u64_of(id).map_err(|e| e.to_string())?;
        let bytes = codec::bytes_of(bytes).map_err(|e| e.to_string())?;
        nodes.insert(id, bytes);
    }
    Ok(nodes)
}

/// A node still to check: its id, the level it must have and the fences its parent gives it.
struct Pending {
    id: u64,
    level: u8,
    low: Vec<u8>,
    high: Option<Vec<u8>>,
}

/// Walks one sub-tree from its root: levels, fences against the parents' entries, each
/// node's own invariants, capacities, and the chain of its leaves. Returns its entries.
fn check_subtree(
    nodes: &HashMap<u64, Vec<u8>>,
    root: u64,
    low: &[u8],
    high: Option<&[u8]>,
    cap: usize,
) -> Result<usize, String> {
    let view = |id: u64| -> Result<NodeView<'_>, String> {
        let bytes = nodes.get(&id).ok_or(format!("node {id} missing"))?;
        match Stored::parse(bytes).map_err(|e| format!("node {id}: {e}"))? {
            Stored::Node(v) => Ok(v),
            Stored::Forward { token, id: to } => Err(format!(
                "node {id} is a forward marker (to {token}:{to}) inside the sub-tree"
            )),
            Stored::Lowered(children) => Err(format!(
                "node {id} is a lowered marker ({} children) inside the sub-tree",
                children.len()
            )),
        }
    };
    let root_view = view(root)?;
    if !root_view.is_root() {
        return Err(format!("node {root} is not marked as a sub-tree root"));
    }
    let mut leaves: Vec<(u64, NodeView<'_>)> = Vec::new();
    // Depth first, left to right, so that the leaves come in key order.
    let mut stack = vec![Pending {
        id: root,
        level: root_view.level(),
        low: low.to_vec(),
        high: high.map(<[u8]>::to_vec),
    }];
    let mut entries = 0;
    while let Some(Pending {
        id,
        level,
        low: lo,
        high: hi,
    }) = stack.pop()
    {
        let v = view(id)?;
        let at = |what: String| format!("node {id}: {what}");
        if v.level() != level {
            return Err(at(format!("level {}, expected {level}", v.level())));
        }
        if v.low() != lo.as_slice() || v.high() != hi.as_deref() {
            return Err(at("fences differ from the parent's entries".into()));
        }
        if id != root && (v.is_root() || v.is_frozen()) {
            return Err(at("marked as a sub-tree root, or frozen, below one".into()));
        }
        v.validate().map_err(at)?;
        if v.len() > cap {
            return Err(at(format!("{} entries, over the capacity {cap}", v.len())));
        }
        if v.is_leaf() {
            entries += v.len();
            leaves.push((id, v));
            continue;
        }
        if v.len() == 0 {
            return Err(at("an inner node without children".into()));
        }
        for i in (0..v.len()).rev() {
            let child_hi = if i + 1 < v.len() {
                Some(v.key(i + 1))
            } else {
                hi.clone()
            };
            stack.push(Pending {
                id: u64::from(v.child(i)),
                level: level - 1,
                low: v.key(i),
                high: child_hi,
            });
        }
    }
    for pair in leaves.windows(2) {
        if u64::from(pair[0].1.right()) != pair[1].0 {
            return Err(format!(
                "leaf {} is not linked to its right neighbour {}",
                pair[0].0, pair[1].0
            ));
        }
    }
    Ok(entries)
}
