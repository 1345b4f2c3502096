// Command pulumi-language-python is InferCrane's minimal Python language host for the hermetic
// toolchain.
//
// The Go module proxy refuses Pulumi's own host module (github.com/pulumi/pulumi/sdk/python/cmd/
// pulumi-language-python/v3: 403 "not available"), so this small host stands in for it when the
// CLI is built from source. It does what the engine needs to run this project: it starts the
// SDK's pulumi-language-python-exec shim (installed next to this binary) with the project's
// virtualenv interpreter and forwards the run request as the shim's flags and environment, and it
// starts a Python policy pack (RunPlugin: what `--policy-pack` asks of a language host) with the
// pack's own virtualenv interpreter; the same way it starts a plugin package's provider (InferCrane's
// component package: `packages:` in a program's Pulumi.yaml). Dependency installation, plugin
// discovery and debugging are left to the user's setup: the project's Makefile owns its virtualenv
// and plugins are installed explicitly. Users with internet use Pulumi's official CLI and host
// instead.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"

	"infercrane/hack/tools/language-hosts/host"
)

type pythonHost struct {
	host.Common
	shim string
}

func main() {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
	host.Main("pulumi-language-python", func(engine string) pulumirpc.LanguageRuntimeServer {
		return &pythonHost{Common: host.Common{EngineAddress: engine}, shim: self + "-exec"}
	})
}

// InstallDependencies installs nothing: the engine asks it before it first runs a plugin package,
// whose interpreter is the user's environment, where infercrane-pulumi is installed. It only
// checks that the interpreter the plugin will run with exists, so that a missing one is named here.
func (h *pythonHost) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest, _ pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	if req.GetInfo() == nil {
		return nil
	}
	_, _, err := python(req.GetInfo())
	return err
}

// python is the interpreter of the project's virtualenv option, else python3 on PATH.
func python(info *pulumirpc.ProgramInfo) (string, []string, error) {
	env := os.Environ()
	venv := ""
	if opts := info.GetOptions(); opts != nil {
		if v, ok := opts.GetFields()["virtualenv"]; ok {
			venv = v.GetStringValue()
		}
	}
	if venv == "" {
		path, err := exec.LookPath("python3")
		return path, env, err
	}
	if !filepath.IsAbs(venv) {
		venv = filepath.Join(info.GetRootDirectory(), venv)
	}
	bin := filepath.Join(venv, "bin")
	env = append(env, "VIRTUAL_ENV="+venv, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	interpreter := filepath.Join(bin, "python")
	if _, err := os.Stat(interpreter); err != nil {
		return "", nil, fmt.Errorf("virtualenv %s has no bin/python", venv)
	}
	return interpreter, env, nil
}

func (h *pythonHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	info := req.GetInfo()
	interpreter, env, err := python(info)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error() + " (run `make venv`)"}, nil
	}
	configEnv, cleanup, err := configEnvironment(req)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	env = append(env, configEnv...)

	pwd, program := host.Program(req)
	args := []string{"-u", h.shim, "--dry_run", strconv.FormatBool(req.GetDryRun())}
	args = append(args, host.Flags(req, h.EngineAddress, pwd, [8]string{
		"monitor", "engine", "project", "root_directory", "stack", "pwd", "parallel", "organization",
	})...)
	args = append(append(args, program), req.GetArgs()...)

	// The request's context ends when the engine hangs up; the program must end with it.
	cmd := exec.CommandContext(ctx, interpreter, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = pwd, env, os.Stdout, os.Stderr
	return host.Run(cmd, "Python"), nil
}

// RunPlugin starts a plugin written in Python, as the engine starts a policy pack: the
// interpreter of the pack's virtualenv option on the pack's directory, with the engine's
// arguments and environment; its output streams back to the engine (which reads the analyzer's
// port from it) and its exit code ends the stream. The engine's hang-up stops the plugin.
func (h *pythonHost) RunPlugin(
	req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer,
) error {
	info := req.GetInfo()
	if info == nil {
		return errors.New("RunPlugin: the engine sent no program info")
	}
	interpreter, env, err := python(info)
	if err != nil {
		return fmt.Errorf("%s plugin in %s: %w", req.GetKind(), info.GetRootDirectory(), err)
	}
	program := filepath.Join(info.GetProgramDirectory(), info.GetEntryPoint())
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(server.Context(), interpreter, append([]string{"-u", program}, req.GetArgs()...)...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = req.GetPwd(), append(env, req.GetEnv()...), stdout, stderr
	ran := cmd.Run()
	// Every line of output reaches the engine before the exit code, which must come last.
	if err := closer.Close(); err != nil {
		return err
	}
	code := int32(0)
	if ran != nil {
		var exitErr *exec.ExitError
		if !errors.As(ran, &exitErr) {
			return fmt.Errorf("could not start the Python plugin %s: %w", program, ran)
		}
		code = int32(exitErr.ExitCode())
	}
	return server.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: code}})
}

// configFileEnv names the file that holds the whole configuration when it is too large for the
// environment; InferCrane's program loads it (infercrane_pulumi/program/program.py).
const configFileEnv = "INFERCRANE_PULUMI_CONFIG_FILE"

// maxConfigEnv keeps PULUMI_CONFIG well under Linux's 128 KiB limit for one environment string
// (MAX_ARG_STRLEN): past it exec fails with "argument list too long" (pulumi/pulumi#8680), which
// a stack of ~1,000 intents reaches.
const maxConfigEnv = 64 * 1024

// configEnvironment is how the program gets its configuration: always in a private file named by
// configFileEnv, and also as Pulumi's usual PULUMI_CONFIG variables while they fit. The file
// holds decrypted secrets, so it lives in a 0700 directory, is 0600, and is removed after the run.
func configEnvironment(req *pulumirpc.RunRequest) ([]string, func(), error) {
	config, secretKeys, err := host.Config(req)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "infercrane-config-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	document, err := json.Marshal(map[string]json.RawMessage{"config": config, "secretKeys": secretKeys})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, document, 0o600); err != nil {
		cleanup()
		return nil, nil, err
	}
	env := []string{configFileEnv + "=" + path}
	if len(config)+len(secretKeys) < maxConfigEnv {
		env = append(env, "PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secretKeys))
	}
	return env, cleanup, nil
}
