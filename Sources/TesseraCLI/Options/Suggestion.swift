// Suggestion.swift — "did you mean": the known spelling nearest to a mistyped option or command.

/// The candidate `word` most likely stands for, or nil when none is close.
///
/// A word that starts a candidate is taken as that candidate cut short (`--tile` is
/// `--tile-size`, not `--title`, one letter away); otherwise the candidate at the fewest edits
/// (a letter added, removed, changed, or two neighbours swapped: `mosiac` is one from `mosaic`),
/// at most a third of the word's letters (dashes not counted), so that `--colour` suggests nothing.
/// Ties go to the candidate listed first.
func nearestSpelling(to word: String, among candidates: [String]) -> String? {
    let letters = word.drop { $0 == "-" }.count
    if letters >= 3 {
        let extended = candidates.filter { $0.count > word.count && $0.hasPrefix(word) }
        if let shortest = extended.min(by: { $0.count < $1.count }) { return shortest }
    }
    let limit = max(1, letters / 3)
    var best: (candidate: String, distance: Int)?
    for candidate in candidates where candidate != word {
        let distance = editDistance(word, candidate)
        if distance <= limit && distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
    }
    return best?.candidate
}

/// The optimal-string-alignment distance between `a` and `b`: the fewest insertions, deletions,
/// substitutions and swaps of adjacent characters that turn one into the other.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
    // rows[i][j]: the distance between the first i characters of a and the first j of b.
    var rows = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { rows[i][0] = i }
    for j in 0...b.count { rows[0][j] = j }
    for i in 1...a.count {
        for j in 1...b.count {
            let substitution = a[i - 1] == b[j - 1] ? 0 : 1
            var distance = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + substitution)
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                distance = min(distance, rows[i - 2][j - 2] + 1)
            }
            rows[i][j] = distance
        }
    }
    return rows[a.count][b.count]
}
