// Command infercrane-standin is the stand-in model server of the local node's images; it is
// installed as vllm and python3 and dispatches on argv[0] (see internal/standin).
package main

import (
	"os"

	"infercrane/hack/tools/infercrane-node/internal/standin"
)

func main() {
	os.Exit(standin.Main(os.Args, os.Stdout, os.Stderr))
}
