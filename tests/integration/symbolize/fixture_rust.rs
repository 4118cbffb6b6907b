// SPDX-License-Identifier: Apache-2.0
// Small Rust program for the real-binary symbolization comparison (iterators, closures, generics get inlined).
use std::collections::HashMap;

#[inline(never)]
fn word_counts(text: &str) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for w in text.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase()) {
        if !w.is_empty() {
            *m.entry(w).or_insert(0) += 1;
        }
    }
    m
}

#[inline(never)]
fn checksum<T: AsRef<[u8]>>(items: &[T]) -> u64 {
    items.iter().flat_map(|s| s.as_ref().iter()).fold(1469598103934665603u64, |h, b| (h ^ *b as u64).wrapping_mul(1099511628211))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let text = args.iter().skip(1).cloned().collect::<Vec<_>>().join(" ");
    let m = word_counts(if text.is_empty() { "the quick brown fox jumps over the lazy dog the end" } else { &text });
    let mut v: Vec<(&String, &usize)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let keys: Vec<&String> = v.iter().map(|p| p.0).collect();
    println!("{} words, checksum {:x}", v.len(), checksum(&keys.iter().map(|s| s.as_bytes()).collect::<Vec<_>>()));
}
