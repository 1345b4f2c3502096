// Package host is what InferCrane's language hosts share: serving the engine (and stopping when it
// is gone or interrupts), the answers every host gives alike, and starting a program the way the
// engine expects its end to be reported.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

const (
	// The language SDKs exit with this code after they have already shown the user an
	// actionable message.
	bailExitCode = 32
	// How often an idle host checks that its engine still exists.
	engineHealthInterval = 5 * time.Second
)

// Common answers the calls every host answers alike; a host embeds it.
type Common struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	// EngineAddress is the engine's, as it passed it (empty when started by hand).
	EngineAddress string
}

func (*Common) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

func (*Common) Handshake(
	context.Context, *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

// GetRequiredPlugins: plugins are installed explicitly (pinned), so nothing is reported for
// acquisition.
func (*Common) GetRequiredPlugins(
	context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (*Common) GetRequiredPackages(
	context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

// Main serves the engine with the host newHost makes for the engine's address, until the engine
// is gone or interrupts; name is the command's, for its errors.
func Main(name string, newHost func(engineAddress string) pulumirpc.LanguageRuntimeServer) {
	args := os.Args[1:]
	if len(args) == 1 && (args[0] == "--version" || args[0] == "version") {
		fmt.Println(version.Version)
		return
	}
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	// The engine passes its address as the last positional argument, after any flags.
	engine := ""
	if len(args) > 0 && !strings.HasPrefix(args[len(args)-1], "-") {
		engine = args[len(args)-1]
	}
	server := newHost(engine)
	// A host whose engine died (say, a SIGKILLed `pulumi up`) must not linger: poll the
	// engine and stop serving once it is gone.
	alive, engineGone := context.WithCancel(context.Background())
	if engine != "" {
		if err := rpcutil.Healthcheck(alive, engine, engineHealthInterval, engineGone); err != nil {
			fail(err)
		}
	}
	// The engine stops its plugins with SIGINT and kills them 5 s later. A host started with
	// SIGINT ignored (as a background job of a non-interactive shell starts: a daemon under
	// `nohup … &`) would sit those 5 s out at the end of every run; handling it un-ignores it.
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	stop := make(chan bool)
	go func() {
		select {
		case <-alive.Done():
		case <-interrupted:
			engineGone()
		}
		close(stop)
	}()
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: stop,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, server)
			return nil
		},
	})
	if err != nil {
		fail(err)
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fail(err)
	}
}

// Program is where the run request's program runs (its working directory) and what it is (its
// entry point, "." for the directory's own).
func Program(req *pulumirpc.RunRequest) (pwd, program string) {
	pwd, program = req.GetPwd(), req.GetInfo().GetEntryPoint()
	if pwd == "" {
		pwd = req.GetInfo().GetProgramDirectory()
	}
	if program == "" {
		program = "."
	}
	return pwd, program
}

// Flags are the engine's run request as a language SDK's entry point takes it, each
// `--<name> <value>` under the names in names (monitor, engine, project, root directory, stack,
// pwd, parallel, organization, in that order); an empty value is left out.
func Flags(req *pulumirpc.RunRequest, engine, pwd string, names [8]string) []string {
	values := [8]string{
		req.GetMonitorAddress(), engine, req.GetProject(), req.GetInfo().GetRootDirectory(),
		req.GetStack(), pwd, strconv.Itoa(int(req.GetParallel())), req.GetOrganization(),
	}
	var flags []string
	for i, value := range values {
		if value != "" {
			flags = append(flags, "--"+names[i], value)
		}
	}
	return flags
}

// Config is the run's configuration and its secret keys, as JSON. A stack without configuration
// is {} and [], never null: the SDKs iterate over both.
func Config(req *pulumirpc.RunRequest) (config, secretKeys []byte, err error) {
	values, keys := req.GetConfig(), req.GetConfigSecretKeys()
	if values == nil {
		values = map[string]string{}
	}
	if keys == nil {
		keys = []string{}
	}
	if config, err = json.Marshal(values); err != nil {
		return nil, nil, err
	}
	secretKeys, err = json.Marshal(keys)
	return config, secretKeys, err
}

// Run runs the program cmd starts and reports its end as the engine expects: nothing, a bail
// (the SDK has told the user already) or the exit code; what is the program's, in language.
func Run(cmd *exec.Cmd, language string) *pulumirpc.RunResponse {
	err := cmd.Run()
	if err == nil {
		return &pulumirpc.RunResponse{}
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not run the %s program: %v", language, err)}
	}
	if exitErr.ExitCode() == bailExitCode {
		return &pulumirpc.RunResponse{Bail: true}
	}
	return &pulumirpc.RunResponse{
		Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exitErr.ExitCode()),
	}
}
