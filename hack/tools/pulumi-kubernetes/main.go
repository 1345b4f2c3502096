// Command pulumi-resource-kubernetes serves the pulumi-kubernetes provider.
//
// The upstream main package embeds files that its release build generates (and git-ignores),
// so this wrapper embeds the committed schema.json and terraform-mapping.json instead.
// hack/tools/build.sh copies both from the module cache next to this file before building.
package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema.json
var schema []byte

//go:embed terraform-mapping.json
var terraformMapping []byte

// withVersion sets the schema's top-level "version" (the committed schema has none),
// as the upstream release build does.
func withVersion(s []byte, v string) []byte {
	s = bytes.TrimLeft(s, " \t\r\n")
	if v == "" || len(s) == 0 || s[0] != '{' {
		return s
	}
	return append([]byte(fmt.Sprintf("{\n    \"version\": %q,", v)), s[1:]...)
}

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println(version.Version)
		return
	}
	provider.Serve("kubernetes", version.Version, withVersion(schema, version.Version), terraformMapping)
}
