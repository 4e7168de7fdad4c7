// Command cudatag stands in for a cuda-tagged goddp program: built with
// -tags cuda, it starts on a machine without a GPU (goddp/cuda loads CUDA
// at run time), so ddprun starts it there too.
package main

import "fmt"

func main() { fmt.Println("cudatag ran") }
