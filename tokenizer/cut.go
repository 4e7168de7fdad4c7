package tokenizer

// GPT-2's pre-tokenizer splits text with
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// matching leftmost pieces one after another, and BPE never merges across
// pieces. A cut at byte i keeps the ids of the whole exactly when a piece
// ends at i and no piece before i depends on what follows i. Two patterns
// guarantee that, whichever definition of \s (Python's, .NET's or
// JavaScript's) an implementation uses, because they look only at visible
// ASCII characters:
//
//   - s[i-2] visible, s[i-1] == '\n', s[i] visible: the line end is a
//     whitespace run of its own (no space before it to join), matched as
//     "\n" whether or not a visible character follows, and no alternative
//     reaches across it.
//   - s[i-1] an ASCII letter, s[i] == ' ', s[i+1] an ASCII letter: the
//     letters before the cut end their piece (letters or a contraction),
//     and " word" after it is one ` ?\p{L}+` piece either way.
//
// Visible means '!'..'~'. Cutting only at ASCII bytes also never splits a
// multi-byte UTF-8 character, nor an invalid sequence that Encode replaces.

func visible(c byte) bool { return c > ' ' && c <= '~' }

func letter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// cutAt reports whether s may be cut before byte i (0 < i < len(s)).
func cutAt[S ~string | ~[]byte](s S, i int) bool {
	if i >= 2 && s[i-1] == '\n' && visible(s[i-2]) && visible(s[i]) {
		return true
	}
	return i+1 < len(s) && s[i] == ' ' && letter(s[i-1]) && letter(s[i+1])
}

// LastCut returns the largest i, 0 < i < len(s), such that encoding s[:i]
// and s[i:] separately and concatenating the ids gives the ids of s; 0 when
// s has no such point that this package recognises (see Chunks). It looks
// at s[i+1] for one kind of cut, so the text after s must not matter: when
// s is a prefix of a longer text, cut the longer text at the result only if
// the result is below len(s)-1, which LastCut ensures.
func LastCut[S ~string | ~[]byte](s S) int {
	// i < len(s)-1 so that the byte after the cut point's own byte is in s
	// for both kinds: a cut decided on a buffer stays valid when more text
	// is appended to it.
	for i := len(s) - 2; i > 0; i-- {
		if cutAt(s, i) {
			return i
		}
	}
	return 0
}

// Chunks splits text into consecutive pieces of at least size bytes (the
// last may be shorter), cut only where Encode of the pieces, concatenated,
// equals Encode of text; a text with no such point comes back whole. The
// pieces share text's memory.
func Chunks(text string, size int) []string {
	size = max(size, 1)
	var out []string
	for len(text) > size {
		i := nextCut(text, size)
		if i == 0 {
			break
		}
		out = append(out, text[:i])
		text = text[i:]
	}
	if len(text) > 0 || len(out) == 0 {
		out = append(out, text)
	}
	return out
}

// nextCut is the smallest cut point at or after from, or 0.
func nextCut(s string, from int) int {
	for i := max(from, 1); i < len(s)-1; i++ {
		if cutAt(s, i) {
			return i
		}
	}
	return 0
}
