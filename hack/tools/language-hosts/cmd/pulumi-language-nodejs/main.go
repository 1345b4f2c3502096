// Command pulumi-language-nodejs is InferCrane's minimal Node.js language host for the hermetic
// toolchain, for TypeScript programs of InferCrane's component package.
//
// The Go module proxy refuses Pulumi's own host module (github.com/pulumi/pulumi/sdk/nodejs/cmd/
// pulumi-language-nodejs/v3: 403 "not available"), as it refuses the Python one. This host runs a
// program with the run entry point of the @pulumi/pulumi npm package the program installed
// (node_modules), node from PATH, the run request as its flags and the configuration in its
// environment; it generates a package's TypeScript SDK and links it into the program's
// package.json (what `pulumi package add` asks: sdk.go). Installing the program's dependencies
// (`npm install`) is the user's.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/structpb"

	"infercrane/hack/tools/language-hosts/host"
)

type nodeHost struct {
	host.Common
}

func main() {
	host.Main("pulumi-language-nodejs", func(engine string) pulumirpc.LanguageRuntimeServer {
		return &nodeHost{Common: host.Common{EngineAddress: engine}}
	})
}

// InstallDependencies installs nothing: the program's node_modules are the user's (`npm install`).
func (*nodeHost) InstallDependencies(
	*pulumirpc.InstallDependenciesRequest, pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	return nil
}

func (h *nodeHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	info := req.GetInfo()
	node, err := exec.LookPath("node")
	if err != nil {
		return &pulumirpc.RunResponse{Error: "node is not on PATH: install Node.js"}, nil
	}
	entry := filepath.Join(info.GetProgramDirectory(), "node_modules", "@pulumi", "pulumi", "cmd", "run")
	if _, err := os.Stat(entry); err != nil {
		return &pulumirpc.RunResponse{
			Error: fmt.Sprintf("%s: @pulumi/pulumi is not installed (run `npm install`)", entry),
		}, nil
	}
	config, secretKeys, err := host.Config(req)
	if err != nil {
		return nil, err
	}
	pwd, program := host.Program(req)
	args := append(strings.Fields(option(info, "nodeargs", "")), entry)
	args = append(args, host.Flags(req, h.EngineAddress, pwd, [8]string{
		"monitor", "engine", "project", "root-directory", "stack", "pwd", "parallel", "organization",
	})...)
	if req.GetDryRun() {
		args = append(args, "--dry-run")
	}
	args = append(append(args, program), req.GetArgs()...)
	env := append(os.Environ(),
		"PULUMI_CONFIG="+string(config),
		"PULUMI_CONFIG_SECRET_KEYS="+string(secretKeys),
		"PULUMI_NODEJS_TYPESCRIPT="+option(info, "typescript", "true"),
	)
	if tsconfig := option(info, "tsconfig", ""); tsconfig != "" {
		env = append(env, "PULUMI_NODEJS_TSCONFIG_PATH="+tsconfig)
	}
	// The request's context ends when the engine hangs up; the program must end with it.
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = pwd, env, os.Stdout, os.Stderr
	return host.Run(cmd, "Node.js"), nil
}

// option is the project's runtime option name as text (a boolean as "true" or "false"), else
// otherwise.
func option(info *pulumirpc.ProgramInfo, name, otherwise string) string {
	value, ok := info.GetOptions().GetFields()[name]
	if !ok {
		return otherwise
	}
	if text, isText := value.GetKind().(*structpb.Value_StringValue); isText {
		return text.StringValue
	}
	return fmt.Sprint(value.GetBoolValue())
}
