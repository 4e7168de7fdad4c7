package tokenizer_test

import (
	"fmt"

	"github.com/goddp/goddp/tokenizer"
)

func Example() {
	tok, err := tokenizer.NewGPT2()
	if err != nil {
		fmt.Println(err)
		return
	}
	ids, _ := tok.Encode("Hello world, it's GPT-2.")
	fmt.Println(ids)
	text, _ := tok.Decode(append(ids, tok.EOT()))
	fmt.Println(text)
	// Output:
	// [15496 995 11 340 338 402 11571 12 17 13]
	// Hello world, it's GPT-2.<|endoftext|>
}
