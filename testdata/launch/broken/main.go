// Command broken does not compile on purpose: ddprun must report the
// compiler's message and exit with code 4.
package main

func main() {
	var n int = "not a number"
	_ = n
}
