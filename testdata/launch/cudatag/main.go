// Command cudatag stands in for a cuda-tagged goddp program: built with
// -tags cuda, ddprun must check for a GPU before starting it (a real one
// would link gorgonia.org/cu, whose init exits the process without a GPU).
package main

import "fmt"

func main() { fmt.Println("cudatag ran") }
