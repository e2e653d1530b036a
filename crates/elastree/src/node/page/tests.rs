//! Unit tests of single pages: searches, prefix changes, splits and merges with their fences,
//! growth, tids, and sizing copies that a concurrent writer tore.

use super::build::{with_content, Content};
use super::layout::Page;
use super::split::{choose_split, fits_merge, merge_from, replacement, split_off};
use super::*;

fn config(with_tid: bool, short_splits: bool) -> PageConfig {
    PageConfig::new(
        (8, 8),
        (256, 256),
        40,
        (with_tid, short_splits, MidWidth::Four),
    )
}

/// An empty leaf page of the largest size.
fn empty(config: &PageConfig) -> NonNull<NodeHeader> {
    alloc_page(config, 0, config.max_bytes(0)).0
}

/// A leaf page holding `keys` (inserted in the given order, value = position in `keys`),
/// checked after every insert.
fn page_of(config: &PageConfig, keys: &[&[u8]]) -> NonNull<NodeHeader> {
    let node = empty(config);
    // SAFETY: freshly allocated, owned by this test.
    let leaf = unsafe { node.as_ref() };
    for (value, key) in keys.iter().enumerate() {
        let probe = VarProbe::new(key, None);
        let hit = PageRepr::search(leaf, config, probe);
        assert!(!hit.found);
        assert!(
            PageRepr::has_room(leaf, config, Some(probe)),
            "room for {key:?}"
        );
        PageRepr::insert_at(leaf, config, hit.pos, probe, value as u64);
        PageRepr::check_node(leaf, config).unwrap();
    }
    node
}

fn keys_of(node: &NodeHeader, config: &PageConfig) -> Vec<Vec<u8>> {
    (0..node.count())
        .map(|i| PageRepr::key_at(node, config, i).bytes)
        .collect()
}

fn free(config: &PageConfig, nodes: &[NonNull<NodeHeader>]) {
    for &node in nodes {
        // SAFETY: unpublished, owned by the test.
        unsafe { PageRepr::free(config, node) };
    }
}

fn owned(bytes: &[u8]) -> VarKey {
    VarKey {
        bytes: bytes.to_vec(),
        tid: None,
    }
}

#[test]
fn inserts_shrink_the_prefix_and_searches_find_every_key() {
    let config = config(false, false);
    let keys: [&[u8]; 6] = [
        b"user/alice/mail",
        b"user/alice/mai",
        b"user/alice/mail\x00",
        b"user/bob",
        b"user/alice/ma\x02x",
        b"usr",
    ];
    let node = page_of(&config, &keys);
    // SAFETY: owned by this test.
    let leaf = unsafe { node.as_ref() };
    let mut sorted: Vec<&[u8]> = keys.to_vec();
    sorted.sort();
    for (pos, key) in sorted.iter().enumerate() {
        let hit = PageRepr::search(leaf, &config, VarProbe::new(key, None));
        assert_eq!((hit.pos, hit.found), (pos, true), "{key:?}");
        assert_eq!(PageRepr::key_at(leaf, &config, pos).bytes, key.to_vec());
    }
    for (probe, pos) in [
        (&b"a"[..], 0),
        (b"user/alice/m", 0),
        (b"user/c", 5),
        (b"z", 6),
    ] {
        let hit = PageRepr::search(leaf, &config, VarProbe::new(probe, None));
        assert_eq!((hit.pos, hit.found), (pos, false), "{probe:?}");
    }
    free(&config, &[node]);
}

#[test]
fn prefixes_longer_than_the_header_copy_compare_through_the_bin() {
    let config = PageConfig::new((8, 8), (1024, 1024), 100, (false, false, MidWidth::Four));
    // A 40-byte shared prefix: the header holds its first 24 bytes.
    let base = b"tenant-000042/warehouse-0007/customer-00".to_vec();
    let with = |tail: &[u8]| [base.as_slice(), tail].concat();
    let keys: Vec<Vec<u8>> = [&b"17"[..], b"18", b"19\x00", b"19\x01"]
        .iter()
        .map(|t| with(t))
        .collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let node = page_of(&config, &refs);
    // SAFETY: owned by this test.
    let leaf = unsafe { node.as_ref() };
    assert!(Page::of(leaf, config.form).meta().prefix_len > 24);
    for (pos, key) in keys.iter().enumerate() {
        let hit = PageRepr::search(leaf, &config, VarProbe::new(key, None));
        assert_eq!((hit.pos, hit.found), (pos, true));
    }
    // Differing in the part of the prefix past the header copy.
    let mut below = base.clone();
    below[30] -= 1;
    let mut above = base.clone();
    above[30] += 1;
    for (probe, pos) in [(below, 0), (above, 4), (base[..35].to_vec(), 0)] {
        let hit = PageRepr::search(leaf, &config, VarProbe::new(&probe, None));
        assert_eq!((hit.pos, hit.found), (pos, false), "{probe:?}");
    }
    free(&config, &[node]);
}

#[test]
fn a_split_gives_each_half_its_own_prefix_and_fences_that_meet() {
    let config = config(false, false);
    let keys: [&[u8]; 4] = [b"aaaa/1/x", b"aaaa/1/y", b"aaaa/2/x", b"aaaa/2/y"];
    let left = page_of(&config, &keys);
    // SAFETY: owned by this test.
    let l = unsafe { left.as_ref() };
    let separator = owned(b"aaaa/2/x");
    let (right, _) = split_off(l, &config, 2, &separator, false);
    // SAFETY: owned by this test.
    let r = unsafe { right.as_ref() };
    for node in [l, r] {
        PageRepr::check_node(node, &config).unwrap();
        assert_eq!(Page::of(node, config.form).meta().prefix_len, 7);
    }
    PageRepr::check_fences(l, &config, None, Some(&separator)).unwrap();
    PageRepr::check_fences(r, &config, Some(&separator), None).unwrap();
    assert!(PageRepr::check_fences(r, &config, None, None).is_err());
    assert!(fits_merge(l, r, 0, &config));
    merge_from(l, r, &config, None);
    PageRepr::check_node(l, &config).unwrap();
    PageRepr::check_fences(l, &config, None, None).unwrap();
    assert_eq!(keys_of(l, &config), keys.map(<[u8]>::to_vec));
    assert_eq!(Page::of(l, config.form).meta().prefix_len, 5);
    free(&config, &[left, right]);
}

#[test]
fn inner_splits_move_the_middle_entry_up() {
    let config = config(false, false);
    let (node, _) = alloc_page(&config, 1, config.max_bytes(1));
    // SAFETY: owned by this test.
    let inner = unsafe { node.as_ref() };
    for (i, key) in [&b"b"[..], b"d", b"f", b"h"].iter().enumerate() {
        PageRepr::insert_at(inner, &config, i, VarProbe::new(key, None), 100 + i as u64);
    }
    let separator = PageRepr::key_at(inner, &config, 2);
    let (right, _) = split_off(inner, &config, 2, &separator, false);
    // SAFETY: owned by this test.
    let r = unsafe { right.as_ref() };
    assert_eq!(keys_of(inner, &config), [b"b".to_vec(), b"d".to_vec()]);
    assert_eq!(keys_of(r, &config), [b"h".to_vec()]);
    assert_eq!(
        r.link() as u64,
        102,
        "the moved-up entry's child leads the right node"
    );
    PageRepr::check_fences(r, &config, Some(&owned(b"f")), None).unwrap();
    // Merging back pulls the separator down with the right node's leftmost child.
    merge_from(inner, r, &config, Some(&separator));
    assert_eq!(keys_of(inner, &config).len(), 4);
    assert_eq!(PageRepr::value_at(inner, &config, 2), 102);
    PageRepr::check_node(inner, &config).unwrap();
    free(&config, &[node, right]);
}

#[test]
fn short_splits_pick_long_prefixes_and_post_short_separators() {
    let config = config(false, true);
    // Two clusters: the split between them gives both halves a long prefix and the parent
    // a one-byte separator.
    let keys: [&[u8]; 6] = [
        b"apple/orchard/1",
        b"apple/orchard/2",
        b"apple/orchard/3",
        b"apple/orchard/4",
        b"banana/grove/1",
        b"banana/grove/2",
    ];
    let node = page_of(&config, &keys);
    // SAFETY: owned by this test.
    let leaf = unsafe { node.as_ref() };
    let at = PageRepr::split_point(leaf, &config);
    assert_eq!(at, 4, "the split falls between the clusters");
    let separator = PageRepr::separator(leaf, &config, at);
    assert_eq!(separator.bytes, b"b");
    assert!(PageRepr::key_at(leaf, &config, at - 1) < separator);
    assert!(separator <= PageRepr::key_at(leaf, &config, at));
    // Without short splits: the middle, and the right key itself.
    let plain = super::tests::config(false, false);
    assert_eq!(PageRepr::split_point(leaf, &plain), 3);
    assert_eq!(PageRepr::separator(leaf, &plain, 3).bytes, keys[3]);
    free(&config, &[node]);
}

#[test]
fn full_pages_grow_then_split_into_pages_sized_to_their_halves() {
    let config = PageConfig::new((64, 64), (2048, 2048), 40, (false, true, MidWidth::Four));
    let (node, size) = alloc_page(&config, 0, 512);
    assert_eq!(size, 512);
    // SAFETY: owned by this test.
    let leaf = unsafe { node.as_ref() };
    // A right sibling, so that the page is not the last leaf (which grows to the largest
    // size at once).
    leaf.set_link(NonNull::<NodeHeader>::dangling().as_ptr());
    let key = |i: u32| format!("key/{:06}/suffix", i * 7).into_bytes();
    let mut i = 0;
    while PageRepr::has_room(leaf, &config, Some(VarProbe::new(&key(i), None))) {
        PageRepr::insert_at(
            leaf,
            &config,
            i as usize,
            VarProbe::new(&key(i), None),
            i.into(),
        );
        i += 1;
    }
    let (grown, second, bytes) = replacement(leaf, &config);
    assert!(second.is_none(), "a page below the largest size grows");
    // SAFETY: owned by this test.
    let g = unsafe { grown.as_ref() };
    assert!(bytes > 512 && bytes <= config.max_bytes(0));
    assert_eq!(keys_of(g, &config), keys_of(leaf, &config));
    PageRepr::check_node(g, &config).unwrap();
    free(&config, &[node]);
    // Fill the largest page, then split it by replacement.
    let (full, _) = alloc_page(&config, 0, config.max_bytes(0));
    // SAFETY: owned by this test.
    let f = unsafe { full.as_ref() };
    f.set_link(NonNull::<NodeHeader>::dangling().as_ptr());
    let mut n = 0;
    while PageRepr::has_room(f, &config, Some(VarProbe::new(&key(n), None))) {
        PageRepr::insert_at(
            f,
            &config,
            n as usize,
            VarProbe::new(&key(n), None),
            n.into(),
        );
        n += 1;
    }
    let (left, second, bytes) = replacement(f, &config);
    let (separator, right) = second.expect("a full largest page splits");
    // SAFETY: owned by this test.
    let (l, r) = unsafe { (left.as_ref(), right.as_ref()) };
    assert_eq!(l.count() + r.count(), n as usize);
    assert!(
        bytes < 2 * config.max_bytes(0),
        "halves are sized to their entries"
    );
    PageRepr::check_fences(l, &config, None, Some(&separator)).unwrap();
    PageRepr::check_fences(r, &config, Some(&separator), None).unwrap();
    for node in [l, r] {
        PageRepr::check_node(node, &config).unwrap();
    }
    free(&config, &[grown, full, left, right]);
}

#[test]
fn torn_entries_size_without_panicking() {
    // A merge check copies two pages under optimistic reads: a concurrent writer can leave
    // the copy unsorted, and sizing it must still not panic.
    with_content(|content: &mut Content| {
        for key in [&b"abcdef"[..], b"x", b"abcxyz", b""] {
            content.push(key, 0, 0);
        }
        // No shared prefix (the empty key); the mid-keys hold 4, 1, 4 and 0 bytes.
        let form = PageConfig::new((8, 8), (256, 256), 40, (false, false, MidWidth::Four)).form;
        assert_eq!(content.prefix_len(0..4, form), 0);
        assert_eq!(content.bin_bytes(0..4, 0, form), 4);
        assert!((1..4).contains(&choose_split(content, true, true)));
    });
}

#[test]
fn tids_order_equal_keys_and_fences_keep_theirs() {
    let config = config(true, true);
    let node = empty(&config);
    // SAFETY: owned by this test.
    let leaf = unsafe { node.as_ref() };
    for tid in [5u64, 1, 9, 3] {
        let probe = VarProbe::new(b"same key", Some(tid));
        let hit = PageRepr::search(leaf, &config, probe);
        PageRepr::insert_at(leaf, &config, hit.pos, probe, tid);
    }
    PageRepr::check_node(leaf, &config).unwrap();
    let tids: Vec<u64> = (0..4)
        .map(|i| PageRepr::key_at(leaf, &config, i).tid.unwrap())
        .collect();
    assert_eq!(tids, [1, 3, 5, 9]);
    let hit = PageRepr::search(leaf, &config, VarProbe::new(b"same key", Some(5)));
    assert_eq!((hit.pos, hit.found), (2, true));
    // Only the tids differ: the separator is the right key itself, tid included.
    let separator = PageRepr::separator(leaf, &config, 2);
    assert_eq!(separator.tid, Some(5));
    let (right, _) = split_off(leaf, &config, 2, &separator, false);
    PageRepr::check_fences(leaf, &config, None, Some(&separator)).unwrap();
    // SAFETY: owned by this test.
    PageRepr::check_fences(unsafe { right.as_ref() }, &config, Some(&separator), None).unwrap();
    free(&config, &[node, right]);
}

/// Random keys over the bytes the encoding treats specially, inserted one by one into a page
/// (rebuilt, split and merged as it fills): every search agrees with a sorted list.
#[test]
fn random_keys_search_like_a_sorted_list() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let alphabet = [0u8, 1, 2, 3, 4, 0x61, 0x62, 0xff];
    for round in 0..300 {
        let mid = if round % 4 < 2 {
            MidWidth::Four
        } else {
            MidWidth::Eight
        };
        let config = PageConfig::new((64, 64), (4096, 4096), 300, (false, round % 2 == 0, mid));
        let node = empty(&config);
        // SAFETY: owned by this test.
        let leaf = unsafe { node.as_ref() };
        let mut sorted: Vec<Vec<u8>> = Vec::new();
        let shared: Vec<u8> = (0..rng.gen_range(0..40))
            .map(|_| alphabet[rng.gen_range(0..8)])
            .collect();
        let draw = |rng: &mut rand::rngs::StdRng| {
            let mut key = shared[..rng.gen_range(0..=shared.len())].to_vec();
            let len = rng.gen_range(0..12);
            key.extend((0..len).map(|_| alphabet[rng.gen_range(0..8)]));
            key
        };
        for _ in 0..rng.gen_range(1..64) {
            let key = draw(&mut rng);
            let probe = VarProbe::new(&key, None);
            let hit = PageRepr::search(leaf, &config, probe);
            let expected = sorted.binary_search(&key);
            assert_eq!(hit.found, expected.is_ok(), "round {round} {key:?}");
            assert_eq!(
                hit.pos,
                expected.unwrap_or_else(|p| p),
                "round {round} {key:?}"
            );
            if hit.found || !PageRepr::has_room(leaf, &config, Some(probe)) {
                continue;
            }
            PageRepr::insert_at(leaf, &config, hit.pos, probe, 0);
            sorted.insert(hit.pos, key);
            PageRepr::check_node(leaf, &config).unwrap();
            assert_eq!(keys_of(leaf, &config), sorted, "round {round}");
        }
        for _ in 0..200 {
            let key = draw(&mut rng);
            let hit = PageRepr::search(leaf, &config, VarProbe::new(&key, None));
            let expected = sorted.binary_search(&key);
            assert_eq!(
                (hit.pos, hit.found),
                (expected.unwrap_or_else(|p| p), expected.is_ok()),
                "round {round} {key:?} in {sorted:?}"
            );
        }
        free(&config, &[node]);
    }
}

/// The split point by its definition: every candidate's score from whole-key comparisons.
fn split_by_definition(content: &Content, leaf: bool) -> usize {
    use super::super::bytes::common_prefix;
    let n = content.len();
    let key = |i: usize| content.key(i);
    let (first, last) = (key(0), key(n - 1));
    let (lo, hi) = ((n / 3).max(1), (2 * n).div_ceil(3).min(n - 1));
    let score = |at: usize| -> (i64, i64) {
        let right = if leaf { at } else { at + 1 };
        let left_saved = at * common_prefix(first, key(at - 1));
        let right_saved = match n - right {
            0 => 0,
            count => count * common_prefix(key(right), last),
        };
        let term = if leaf {
            (common_prefix(key(at - 1), key(at)) + 1).min(key(at).len())
        } else {
            key(at).len()
        };
        let off_middle = (at as i64 - (n / 2) as i64).abs();
        (
            (left_saved + right_saved) as i64 - 4 * term as i64,
            -off_middle,
        )
    };
    (lo..=hi).max_by_key(|&at| score(at)).unwrap()
}

#[test]
fn split_point_matches_its_definition() {
    // Sorted keys over a small alphabet, of lengths 0 to 19, in runs that share prefixes.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (state >> 33) % bound
    };
    for round in 0..300 {
        let n = 3 + next(60) as usize;
        let mut keys: Vec<Vec<u8>> = (0..n)
            .map(|_| {
                let len = next(20) as usize;
                (0..len).map(|_| b"aab\x00z"[next(5) as usize]).collect()
            })
            .collect();
        keys.sort();
        with_content(|content: &mut Content| {
            for key in &keys {
                content.push(key, 0, 0);
            }
            for leaf in [true, false] {
                assert_eq!(
                    choose_split(content, leaf, true),
                    split_by_definition(content, leaf),
                    "round {round}, leaf {leaf}: {keys:?}"
                );
            }
        });
    }
}

#[test]
fn patches_equal_pages_built_from_the_changed_entries() {
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let alphabet = [0u8, 1, 2, 3, 7, 8, 0x61, 0xff];
    let (mut patched, mut declined) = (0, 0);
    for round in 0..400 {
        let mid = if round % 4 < 2 {
            MidWidth::Four
        } else {
            MidWidth::Eight
        };
        let with_tid = round % 3 == 0;
        let config = PageConfig::new((64, 64), (2048, 2048), 60, (with_tid, true, mid));
        let shared: Vec<u8> = (0..rng.gen_range(0..30))
            .map(|_| alphabet[rng.gen_range(0..8)])
            .collect();
        let draw = |rng: &mut rand::rngs::StdRng| {
            // Now and then a key outside the shared prefix.
            let cut = match rng.gen_range(0..20) {
                0 => rng.gen_range(0..=shared.len()),
                _ => shared.len(),
            };
            let mut key = shared[..cut].to_vec();
            key.extend((0..rng.gen_range(0..14)).map(|_| alphabet[rng.gen_range(0..8)]));
            (key, if with_tid { rng.gen_range(0..3) } else { 0 })
        };
        let mut entries: BTreeMap<(Vec<u8>, u64), u64> = BTreeMap::new();
        for v in 0..rng.gen_range(1..50) {
            entries.insert(draw(&mut rng), v);
        }
        let fence_key = |key: &[u8], tid: u64| VarKey {
            bytes: key.to_vec(),
            tid: with_tid.then_some(tid),
        };
        let low = fence_key(&[], 0);
        let high = fence_key(&[0xff; 16], 9);
        let fences = (Some(&low), Some(&high));
        let build = |entries: &BTreeMap<(Vec<u8>, u64), u64>| {
            let mut image = PageImage::default();
            for ((key, tid), value) in entries {
                image.push(key, *tid, *value);
            }
            let n = image.len();
            image
                .fits(&config, 0, 0..n, fences)
                .then(|| image.build(&config, 0, 0..n, fences).0)
        };
        let Some(base) = build(&entries) else {
            continue;
        };
        let mut changes: BTreeMap<(Vec<u8>, u64), Option<u64>> = BTreeMap::new();
        for v in 0..rng.gen_range(0..8) {
            let key = match rng.gen_range(0..3) {
                // Replace or remove a key the page holds.
                0 => entries
                    .keys()
                    .nth(rng.gen_range(0..entries.len()))
                    .unwrap()
                    .clone(),
                _ => draw(&mut rng),
            };
            changes.insert(key, rng.gen_bool(0.7).then_some(100 + v));
        }
        let edits: Vec<Edit<'_>> = changes
            .iter()
            .map(|((key, tid), value)| Edit {
                key,
                tid: *tid,
                value: *value,
                // Every other round, the positions a search of the base page gives.
                at: (round % 2 == 1).then(|| {
                    // SAFETY: built above, owned by this test.
                    let probe = VarProbe::new(key, with_tid.then_some(*tid));
                    let hit = PageRepr::search(unsafe { base.as_ref() }, &config, probe);
                    (hit.pos, hit.found)
                }),
            })
            .collect();
        // SAFETY: built above, owned by this test.
        let result = PageImage::default().patch(&config, unsafe { base.as_ref() }, &edits);
        let mut expected = entries.clone();
        for (key, value) in &changes {
            match value {
                Some(v) => expected.insert(key.clone(), *v),
                None => expected.remove(key),
            };
        }
        let Some(result) = result else {
            declined += 1;
            free(&config, &[base]);
            continue;
        };
        patched += 1;
        // SAFETY: as above.
        let node = unsafe { result.node.as_ref() };
        PageRepr::check_node(node, &config).unwrap();
        assert_eq!(result.count, expected.len());
        assert_eq!(result.size, Page::bytes_of(node));
        let got: Vec<((Vec<u8>, u64), u64)> = (0..node.count())
            .map(|i| {
                let key = PageRepr::key_at(node, &config, i);
                let value = PageRepr::value_at(node, &config, i);
                ((key.bytes, key.tid.unwrap_or(0)), value)
            })
            .collect();
        let want: Vec<((Vec<u8>, u64), u64)> = expected.clone().into_iter().collect();
        assert_eq!(got, want, "round {round}");
        assert_eq!(fence(node, &config, true), Some(low.clone()));
        assert_eq!(fence(node, &config, false), Some(high.clone()));
        for ((key, tid), value) in &expected {
            let hit = PageRepr::search(node, &config, VarProbe::new(key, with_tid.then_some(*tid)));
            assert!(hit.found, "round {round}: {key:?}");
            assert_eq!(PageRepr::value_at(node, &config, hit.pos), *value);
        }
        // Exactly the bytes a page built from the same entries takes, under the same prefix.
        let rebuilt = build(&expected).expect("the patched entries fit");
        // SAFETY: as above.
        let rebuilt_ref = unsafe { rebuilt.as_ref() };
        if Page::of(rebuilt_ref, config.form).meta().prefix_len
            == Page::of(node, config.form).meta().prefix_len
        {
            assert_eq!(result.size, Page::bytes_of(rebuilt_ref), "round {round}");
        }
        free(&config, &[base, result.node, rebuilt]);
    }
    assert!(
        patched > 100 && declined > 10,
        "{patched} patched, {declined} declined"
    );
}

#[test]
fn page_keys_share_what_whole_keys_share() {
    use super::super::bytes::common_prefix;
    use super::cut::PageKeys;
    use super::split::SplitKeys;
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    // Small bytes (the mid-key encoding's markers), a shared stem, keys of every length up
    // to 20, and equal keys with different tids.
    let alphabet = [0u8, 1, 2, 3, 4, 7, 8, 0x61];
    for round in 0..300 {
        let mid = [MidWidth::Four, MidWidth::Eight][round % 2];
        let with_tid = round % 3 == 0;
        let config = PageConfig::new((64, 64), (4096, 4096), 40, (with_tid, true, mid));
        let stem: Vec<u8> = (0..rng.gen_range(0..12))
            .map(|_| alphabet[rng.gen_range(0..8)])
            .collect();
        let mut entries: Vec<(Vec<u8>, u64)> = (0..rng.gen_range(3..60))
            .map(|_| {
                let mut key = stem.clone();
                key.extend((0..rng.gen_range(0..20)).map(|_| alphabet[rng.gen_range(0..8)]));
                (key, if with_tid { rng.gen_range(0..3) } else { 0 })
            })
            .collect();
        entries.sort();
        entries.dedup();
        let mut image = PageImage::default();
        for (v, (key, tid)) in entries.iter().enumerate() {
            image.push(key, *tid, v as u64);
        }
        let n = image.len();
        let node = image.build(&config, 0, 0..n, (None, None)).0;
        // SAFETY: built above, owned by this test.
        let page = Page::of(unsafe { node.as_ref() }, config.form);
        let keys = PageKeys::new(&page);
        assert_eq!(keys.count(), n);
        for i in 0..n {
            assert_eq!(
                keys.key_len(i),
                entries[i].0.len(),
                "round {round}, key {i}"
            );
            for j in i..n {
                let want = common_prefix(&entries[i].0, &entries[j].0);
                assert_eq!(
                    keys.shared(i, j),
                    want,
                    "round {round}: {i} {j} {entries:?}"
                );
            }
        }
        with_content(|content: &mut Content| {
            for (key, tid) in &entries {
                content.push(key, *tid, 0);
            }
            for leaf in [true, false] {
                assert_eq!(
                    choose_split(&keys, leaf, true),
                    choose_split(content, leaf, true)
                );
            }
        });
        free(&config, &[node]);
    }
}

#[test]
fn moved_splits_equal_splits_rebuilt_from_whole_keys() {
    use super::super::bytes::common_prefix;
    use super::split::shortest_separator;
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let alphabet = [0u8, 1, 3, 7, 8, 0x61, 0x62, 0xff];
    let (mut moved, mut rebuilt) = (0, 0);
    for round in 0..60 {
        let mid = [MidWidth::Four, MidWidth::Eight][round % 2];
        let with_tid = round % 3 == 0;
        let short_splits = round % 5 != 0;
        let config = PageConfig::new((64, 64), (1024, 1024), 40, (with_tid, short_splits, mid));
        // Keys share a stem; some rounds have keys in groups with stems of their own, so
        // that a split between groups lengthens a half's prefix.
        let stems: Vec<Vec<u8>> = (0..[1, 3][round % 2])
            .map(|_| {
                (0..rng.gen_range(0..10))
                    .map(|_| alphabet[rng.gen_range(0..8)])
                    .collect()
            })
            .collect();
        let draw = |rng: &mut rand::rngs::StdRng| {
            let mut key = stems[rng.gen_range(0..stems.len())].clone();
            key.extend((0..rng.gen_range(1..24)).map(|_| alphabet[rng.gen_range(0..8)]));
            (key, if with_tid { rng.gen_range(0..4) } else { 0 })
        };
        let mut node = empty(&config);
        let mut fences: (Option<VarKey>, Option<VarKey>) = (None, None);
        let mut value = 0;
        let mut outside = 0;
        for _ in 0..12 {
            // Fill the page with keys within its fences, growing it while it is below the
            // largest size, then split it and go on with one of its halves.
            loop {
                // SAFETY: owned by this test.
                let leaf = unsafe { node.as_ref() };
                // Once the fences are narrow most fresh draws fall outside them: after a miss,
                // every other candidate is a key on the page with its last byte redrawn or one
                // byte appended (usually within them).
                let (key, tid) = if outside % 2 == 1 && leaf.count() > 0 {
                    let on_page = PageRepr::key_at(leaf, &config, rng.gen_range(0..leaf.count()));
                    let mut key = on_page.bytes;
                    let byte = alphabet[rng.gen_range(0..8)];
                    if key.len() >= 40 || rng.gen_bool(0.3) {
                        key.pop();
                    }
                    key.push(byte);
                    (key, if with_tid { rng.gen_range(0..4) } else { 0 })
                } else {
                    draw(&mut rng)
                };
                let probe_key = VarKey {
                    bytes: key.clone(),
                    tid: with_tid.then_some(tid),
                };
                let within = fences.0.as_ref().is_none_or(|low| *low <= probe_key)
                    && fences.1.as_ref().is_none_or(|high| probe_key < *high);
                if !within {
                    outside += 1;
                    continue;
                }
                outside = 0;
                let probe = VarProbe::new(&key, with_tid.then_some(tid));
                let hit = PageRepr::search(leaf, &config, probe);
                if hit.found {
                    continue;
                }
                if PageRepr::has_room(leaf, &config, Some(probe)) {
                    PageRepr::insert_at(leaf, &config, hit.pos, probe, value);
                    value += 1;
                    continue;
                }
                if Page::bytes_of(leaf) == config.max_bytes(0) {
                    break;
                }
                let (grown, second, _) = replacement(leaf, &config);
                assert!(second.is_none());
                free(&config, &[node]);
                node = grown;
            }
            // SAFETY: owned by this test.
            let leaf = unsafe { node.as_ref() };
            let entries: Vec<(VarKey, u64)> = (0..leaf.count())
                .map(|i| {
                    (
                        PageRepr::key_at(leaf, &config, i),
                        PageRepr::value_at(leaf, &config, i),
                    )
                })
                .collect();
            let prefix_len = Page::of(leaf, config.form).meta().prefix_len;
            let at = with_content(|content: &mut Content| {
                for (key, v) in &entries {
                    content.push(&key.bytes, key.tid.unwrap_or(0), *v);
                }
                choose_split(content, true, short_splits)
            });
            let halves_prefix = |range: std::ops::Range<usize>| {
                common_prefix(
                    &entries[range.start].0.bytes,
                    &entries[range.end - 1].0.bytes,
                )
            };
            if halves_prefix(0..at) == prefix_len && halves_prefix(at..entries.len()) == prefix_len
            {
                moved += 1;
            } else {
                rebuilt += 1;
            }
            let (left, second, _) = replacement(leaf, &config);
            let (separator, right) = second.expect("a full largest page splits");
            let want = shortest_separator(&entries[at - 1].0, entries[at].0.clone(), short_splits);
            assert_eq!(separator, want, "round {round}");
            // SAFETY: owned by this test.
            let (l, r) = unsafe { (left.as_ref(), right.as_ref()) };
            for (half, range) in [(l, 0..at), (r, at..entries.len())] {
                PageRepr::check_node(half, &config).unwrap();
                let got: Vec<(VarKey, u64)> = (0..half.count())
                    .map(|i| {
                        (
                            PageRepr::key_at(half, &config, i),
                            PageRepr::value_at(half, &config, i),
                        )
                    })
                    .collect();
                assert_eq!(got, entries[range.clone()], "round {round}");
                // Every half has the longest prefix of its own keys.
                assert_eq!(
                    Page::of(half, config.form).meta().prefix_len,
                    halves_prefix(range)
                );
            }
            PageRepr::check_fences(l, &config, fences.0.as_ref(), Some(&separator)).unwrap();
            PageRepr::check_fences(r, &config, Some(&separator), fences.1.as_ref()).unwrap();
            free(&config, &[node]);
            // Go on with one half.
            if rng.gen_bool(0.5) {
                free(&config, &[right]);
                node = left;
                fences.1 = Some(separator);
            } else {
                free(&config, &[left]);
                node = right;
                fences.0 = Some(separator);
            }
        }
        free(&config, &[node]);
    }
    assert!(
        moved > 100 && rebuilt > 20,
        "{moved} moved, {rebuilt} rebuilt"
    );
}

#[test]
fn whole_key_pages_never_factor_out_a_prefix() {
    // Keys that share a 20-byte stem: an optimized page factors it out, a page of whole
    // keys (the Base organization) keeps it in every entry, through inserts, growth and
    // splits, which take the middle and post the right half's first key whole.
    let keys: Vec<Vec<u8>> = (0..200u32)
        .map(|i| {
            let mut key = b"tenant-0042/objects/".to_vec();
            key.extend_from_slice(&(i * 7919 % 1000).to_be_bytes());
            key
        })
        .collect();
    let optimized = config(false, false);
    let config = optimized.whole_keys();
    assert!(!config.factors_prefix());
    let mut node = empty(&config);
    let mut inserted: Vec<Vec<u8>> = Vec::new();
    let mut splits = 0;
    let mut high: Option<Vec<u8>> = None;
    for (value, key) in keys.iter().enumerate() {
        if high.as_ref().is_some_and(|high| key >= high) {
            continue;
        }
        // SAFETY: owned by this test.
        let leaf = unsafe { node.as_ref() };
        let probe = VarProbe::new(key, None);
        if !PageRepr::has_room(leaf, &config, Some(probe)) {
            let (first, second, _) = replacement(leaf, &config);
            free(&config, &[node]);
            node = first;
            if let Some((separator, right)) = second {
                splits += 1;
                // SAFETY: owned by this test.
                let (l, r) = unsafe { (first.as_ref(), right.as_ref()) };
                let mut sorted = inserted.clone();
                sorted.sort();
                let at = l.count();
                assert_eq!(at, sorted.len() / 2, "a split in the middle");
                assert_eq!(
                    separator.bytes, sorted[at],
                    "the right half's first key, whole"
                );
                for half in [l, r] {
                    PageRepr::check_node(half, &config).unwrap();
                    assert_eq!(Page::of(half, config.form).meta().prefix_len, 0);
                }
                // Go on with the left half only: keep its keys, below its high fence.
                inserted = sorted[..at].to_vec();
                high = Some(separator.bytes);
                free(&config, &[right]);
            }
            continue;
        }
        let hit = PageRepr::search(leaf, &config, probe);
        PageRepr::insert_at(leaf, &config, hit.pos, probe, value as u64);
        PageRepr::check_node(leaf, &config).unwrap();
        assert_eq!(Page::of(leaf, config.form).meta().prefix_len, 0);
        inserted.push(key.clone());
    }
    assert!(splits > 3, "{splits} splits");
    // The same keys on an optimized page share their stem as its prefix.
    let page = page_of(&optimized, &[&keys[0][..], &keys[1][..], &keys[2][..]]);
    // SAFETY: owned by this test.
    let meta = Page::of(unsafe { page.as_ref() }, optimized.form).meta();
    assert!(meta.prefix_len >= 20, "prefix of {} bytes", meta.prefix_len);
    free(&config, &[node]);
    free(&optimized, &[page]);
}

/// Whether page `node`'s shape carries the suffix-free flag.
fn suffix_free(node: &NodeHeader, config: &PageConfig) -> bool {
    Page::of(node, config.form).suffix_free
}

#[test]
fn pages_whose_keys_fit_their_mid_keys_skip_the_suffixes() {
    let config = PageConfig::new((16, 16), (512, 512), 16, (false, true, MidWidth::Eight));
    // Eight-byte keys that differ only in their last byte, and one that is a prefix of
    // another: every remainder fits an 8-byte mid-key.
    let short: Vec<[u8; 8]> = (0..6u8).map(|b| [7, 7, 7, 7, 7, 7, 7, b * 3]).collect();
    let mut keys: Vec<&[u8]> = short.iter().map(|k| &k[..]).collect();
    keys.push(&b"\x07\x07\x07"[..]);
    let node = page_of(&config, &keys);
    // SAFETY: owned by this test.
    let leaf = unsafe { node.as_ref() };
    assert!(suffix_free(leaf, &config), "no key has a suffix");
    let search = |key: &[u8]| {
        let hit = PageRepr::search(leaf, &config, VarProbe::new(key, None));
        (hit.pos, hit.found)
    };
    assert_eq!(search(&[7, 7, 7, 7, 7, 7, 7, 3]), (2, true));
    assert_eq!(search(&[7, 7, 7, 7, 7, 7, 7, 4]), (3, false));
    // A probe longer than every key ties on its mid-key and sorts after the entry.
    assert_eq!(search(&[7, 7, 7, 7, 7, 7, 7, 3, 0]), (3, false));
    assert_eq!(search(&[7, 7, 7]), (0, true));

    // A key with a suffix clears the flag, and searches compare suffixes again.
    let long = [7, 7, 7, 7, 7, 7, 7, 3, 1, 2, 3];
    let probe = VarProbe::new(&long, None);
    let hit = PageRepr::search(leaf, &config, probe);
    assert_eq!((hit.pos, hit.found), (3, false));
    PageRepr::insert_at(leaf, &config, hit.pos, probe, 99);
    PageRepr::check_node(leaf, &config).unwrap();
    assert!(!suffix_free(leaf, &config), "the long key has a suffix");
    assert_eq!(search(&long), (3, true));
    assert_eq!(search(&[7, 7, 7, 7, 7, 7, 7, 3, 0]), (3, false));
    assert_eq!(search(&[7, 7, 7, 7, 7, 7, 7, 3, 1, 2, 4]), (4, false));

    // A page built without it has the flag, one built with it has not.
    let build = |with_long: bool| {
        let mut image = PageImage::default();
        for (value, key) in keys_of(leaf, &config).iter().enumerate() {
            if with_long || key[..] != long[..] {
                image.push(key, 0, value as u64);
            }
        }
        let n = image.len();
        image.build(&config, 0, 0..n, (None, None)).0
    };
    let (without, with) = (build(false), build(true));
    // SAFETY: built by this test, not shared.
    let (without_page, with_page) = unsafe { (without.as_ref(), with.as_ref()) };
    assert!(suffix_free(without_page, &config));
    assert!(!suffix_free(with_page, &config));
    for page in [without_page, with_page] {
        PageRepr::check_node(page, &config).unwrap();
        let hit = PageRepr::search(page, &config, VarProbe::new(&short[4], None));
        assert!(hit.found);
    }
    free(&config, &[node, without, with]);
}

/// Scans hand out every key whole whatever the length of the page's prefix (under a prefix
/// shorter than a word, a key's first word is written in one store that joins the prefix and
/// the mid-key), on pages with suffixes and suffix-free ones (whose suffix locations the
/// scan does not read), under both mid-key widths and in both directions.
#[test]
fn scans_assemble_keys_under_prefixes_of_every_length() {
    for mid in [MidWidth::Four, MidWidth::Eight] {
        let config = PageConfig::new((64, 64), (4096, 4096), 40, (false, true, mid));
        let w = mid.bytes();
        for prefix_len in 0..=10 {
            // Bytes after the prefix: fitting the mid-key, or not.
            for rest_len in [1, w - 1, w + 5] {
                let keys: Vec<Vec<u8>> = (0..20u8)
                    .map(|i| {
                        let mut key = vec![0x5a; prefix_len];
                        key.push(i * 11 + 1);
                        key.extend((1..rest_len).map(|j| j as u8 ^ i));
                        key
                    })
                    .collect();
                let mut image = PageImage::default();
                for (value, key) in keys.iter().enumerate() {
                    image.push(key, 0, value as u64);
                }
                let node = image.build(&config, 0, 0..keys.len(), (None, None)).0;
                // SAFETY: built by this test, not shared.
                let page = unsafe { node.as_ref() };
                PageRepr::check_node(page, &config).unwrap();
                assert_eq!(suffix_free(page, &config), rest_len < w);
                assert_eq!(Page::of(page, config.form).meta().prefix_len, prefix_len);
                for descending in [false, true] {
                    let mut batch = PageBatch::default();
                    let mut got = Vec::new();
                    let handed = batch.visit_published(
                        page,
                        &config,
                        (2, keys.len()),
                        descending,
                        |key, value| got.push((key.bytes.clone(), value)),
                    );
                    let mut want: Vec<(Vec<u8>, u64)> = (2..keys.len())
                        .map(|i| (keys[i].clone(), i as u64))
                        .collect();
                    if descending {
                        want.reverse();
                    }
                    assert_eq!(handed, want.len());
                    assert_eq!(
                        got, want,
                        "{mid:?} mid-keys, prefix {prefix_len}, rest {rest_len}"
                    );
                }
                free(&config, &[node]);
            }
        }
    }
}
