//! The whole-index invariant check: each sub-tree checked on its master by `et_check`
//! (fences, order, levels, capacities, leaf links), then, here, the top against the roots:
//! the first entry starts at minus infinity, each root's fences are its entry's low fence
//! and the next entry's, and each tag's entry count is the sum of its sub-trees'.

use std::collections::BTreeMap;

use redis::Value;

use crate::codec;
use crate::error::DistError;
use crate::index::DistIndex;

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
    let cap = index.options.node_capacity.to_string();
    let mut per_token: BTreeMap<u64, i64> = BTreeMap::new();
    for (i, entry) in top.entries.iter().enumerate() {
        let id = entry.id.to_string();
        let reply = index.call_tag(
            "et_check",
            entry.token,
            &[id.as_bytes(), cap.as_bytes()],
            false,
            deadline,
        )?;
        let Value::Array(parts) = &reply else {
            return Err(DistError::Corrupt(format!("et_check reply {reply:?}")));
        };
        let status = codec::bytes_of(parts.first().unwrap_or(&Value::Nil))?;
        let name = format!("sub-tree {}:{} (entry {i})", entry.token, entry.id);
        if status != b"OK" || parts.len() < 7 {
            return Err(DistError::Corrupt(format!(
                "{name} is not a sub-tree root ({})",
                String::from_utf8_lossy(&status)
            )));
        }
        let count = codec::int(&parts[1])?;
        let lo = codec::bytes_of(&parts[4])?;
        let hi_inf = codec::int(&parts[6])? == 1;
        let hi = codec::bytes_of(&parts[5])?;
        if lo != entry.lo {
            return Err(DistError::Corrupt(format!(
                "{name}: low fence {lo:?} differs from the top's {:?}",
                entry.lo
            )));
        }
        match top.entries.get(i + 1) {
            Some(next) if hi_inf || hi != next.lo => {
                return Err(DistError::Corrupt(format!(
                "{name}: high fence {} but the next sub-tree starts at {:?} (an unposted split?)",
                if hi_inf {
                    "+inf".to_string()
                } else {
                    format!("{hi:?}")
                },
                next.lo
            )))
            }
            None if !hi_inf => {
                return Err(DistError::Corrupt(format!(
                    "{name}: the last sub-tree ends at {hi:?}, not +inf"
                )))
            }
            _ => {}
        }
        *per_token.entry(entry.token).or_default() += count;
    }
    for (token, expected) in per_token {
        let stored = codec::int(&index.call_tag("et_tag_count", token, &[], false, deadline)?)?;
        if stored != expected {
            return Err(DistError::Corrupt(format!(
                "tag {token} counts {stored} entries but its sub-trees hold {expected}"
            )));
        }
    }
    Ok(())
}
