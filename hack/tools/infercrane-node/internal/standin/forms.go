// Package standin is a stand-in model server for the local node: it keeps the launch contracts
// of the real vLLM and SGLang images (which argv they take, their defaults, where the API key
// comes from) and the HTTP surface Kubernetes and InferCrane touch (/health, /v1/models), and
// loads no model. This file turns an argv into a Launch and must not start anything: a refused
// argv is reported before the process listens.
package standin

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Form names which real launch contract an argv followed; /standin reports it.
type Form string

const (
	FormVLLMServe     Form = "vllm-serve"
	FormVLLMAPIServer Form = "vllm-api-server"
	FormSGLang        Form = "sglang"
)

// Launch is everything one accepted argv asks for.
type Launch struct {
	Form            Form
	Owner           string // owned_by in /v1/models
	Model           string
	ServedModelName string
	Revision        string
	Host            string
	Port            int
	APIKey          string
	LoadSeconds     float64
	ShutdownSeconds float64
	TerminationLog  string
}

// UsageError is a refused argv; it prints as argparse's error line with the usage folded in,
// so a refusal is exactly one line on stderr.
type UsageError struct {
	Prog, Usage, Message string
}

func (e *UsageError) Error() string {
	return fmt.Sprintf("%s: error: %s (usage: %s)", e.Prog, e.Message, e.Usage)
}

// contract is one real entrypoint: how it names its model and what it defaults to.
type contract struct {
	form        Form
	prog        string // what argparse calls the program in its messages
	usage       string
	modelFlag   string // "" when the model is the one positional argument
	defaultHost string
	defaultPort int
	keyFromEnv  bool // vLLM falls back to VLLM_API_KEY; SGLang reads --api-key only
	owner       string
}

var (
	vllmServe = contract{
		form: FormVLLMServe, prog: "vllm serve", usage: "vllm serve <model_tag> [options]",
		defaultHost: "0.0.0.0", defaultPort: 8000, keyFromEnv: true, owner: "vllm",
	}
	// python3 -m runs the module as __main__, so argparse names it by its file.
	vllmAPIServer = contract{
		form: FormVLLMAPIServer, prog: "api_server.py",
		usage:     "python3 -m vllm.entrypoints.openai.api_server --model MODEL [options]",
		modelFlag: "--model", defaultHost: "0.0.0.0", defaultPort: 8000, keyFromEnv: true, owner: "vllm",
	}
	// SGLang binds to loopback unless told otherwise, like the real server: a workload whose
	// command forgets --host 0.0.0.0 is unreachable here too.
	sglang = contract{
		form: FormSGLang, prog: "launch_server.py",
		usage:     "python3 -m sglang.launch_server --model-path MODEL_PATH [options]",
		modelFlag: "--model-path", defaultHost: "127.0.0.1", defaultPort: 30000, owner: "sglang",
	}
	pythonModules = map[string]contract{
		"vllm.entrypoints.openai.api_server": vllmAPIServer,
		"sglang.launch_server":               sglang,
	}
)

const (
	defaultLoadSeconds    = 1
	defaultTerminationLog = "/dev/termination-log"
	loadSecondsEnv        = "STANDIN_LOAD_SECONDS"
	vllmKeyEnv            = "VLLM_API_KEY"
)

// Parse dispatches on argv[0]'s basename like a multi-call binary and parses the rest as the
// matching real entrypoint would; getenv supplies VLLM_API_KEY and STANDIN_LOAD_SECONDS.
func Parse(argv []string, getenv func(string) string) (Launch, error) {
	if len(argv) == 0 {
		return Launch{}, &UsageError{"infercrane-standin", "vllm serve … | python3 -m …", "empty argv"}
	}
	name := filepath.Base(argv[0])
	switch name {
	case "vllm":
		if len(argv) < 2 {
			return Launch{}, &UsageError{"vllm", "vllm serve <model_tag> [options]",
				"the following arguments are required: subcommand"}
		}
		if argv[1] != "serve" {
			return Launch{}, &UsageError{"vllm", "vllm serve <model_tag> [options]",
				fmt.Sprintf("argument subcommand: invalid choice: %q (choose from 'serve')", argv[1])}
		}
		return parseContract(vllmServe, argv[2:], getenv)
	case "python3":
		usage := "python3 -m vllm.entrypoints.openai.api_server | python3 -m sglang.launch_server"
		if len(argv) < 3 || argv[1] != "-m" {
			return Launch{}, &UsageError{"python3", usage, "the stand-in runs only `python3 -m <module>`"}
		}
		c, ok := pythonModules[argv[2]]
		if !ok {
			return Launch{}, &UsageError{"python3", usage, fmt.Sprintf("no module named %q in the stand-in", argv[2])}
		}
		return parseContract(c, argv[3:], getenv)
	}
	return Launch{}, &UsageError{name, "vllm serve … | python3 -m …",
		fmt.Sprintf("run as vllm or python3 (argv[0] basename), not %q", name)}
}

func parseContract(c contract, args []string, getenv func(string) string) (Launch, error) {
	l := Launch{Form: c.form, Owner: c.owner, Host: c.defaultHost, Port: c.defaultPort,
		LoadSeconds: defaultLoadSeconds, TerminationLog: defaultTerminationLog}
	refuse := func(format string, a ...any) (Launch, error) {
		return Launch{}, &UsageError{c.prog, c.usage, fmt.Sprintf(format, a...)}
	}
	if v := getenv(loadSecondsEnv); v != "" {
		seconds, err := parseSeconds(v)
		if err != nil {
			return refuse("environment %s: %v", loadSecondsEnv, err)
		}
		l.LoadSeconds = seconds
	}
	var portText, loadText, shutdownText string
	known := map[string]*string{
		"--host": &l.Host, "--port": &portText, "--revision": &l.Revision,
		"--served-model-name": &l.ServedModelName, "--api-key": &l.APIKey,
		"--standin-load-seconds": &loadText, "--standin-shutdown-seconds": &shutdownText,
		"--standin-termination-log": &l.TerminationLog,
	}
	if c.modelFlag != "" {
		known[c.modelFlag] = &l.Model
	}
	var positionals []string
	for i := 0; i < len(args); i++ {
		token := args[i]
		if !isFlag(token) {
			positionals = append(positionals, token)
			continue
		}
		name, value, inline := strings.Cut(token, "=")
		target, isKnown := known[name]
		nextIsValue := i+1 < len(args) && !isFlag(args[i+1])
		switch {
		case isKnown && inline:
			*target = value
		case isKnown && nextIsValue:
			*target = args[i+1]
			i++
		case isKnown:
			return refuse("argument %s: expected one argument", name)
		case !inline && nextIsValue:
			// An engine argument we do not model (vLLM passes them through): it takes the
			// next token as its value, as the flag's real definition would.
			i++
		}
	}
	// argparse's order: a missing required argument first, then what is left over.
	if c.modelFlag == "" {
		if len(positionals) == 0 {
			return refuse("the following arguments are required: model_tag")
		}
		l.Model, positionals = positionals[0], positionals[1:]
	} else if l.Model == "" {
		return refuse("the following arguments are required: %s", c.modelFlag)
	}
	if len(positionals) > 0 {
		return refuse("unrecognized arguments: %s", strings.Join(positionals, " "))
	}
	if portText != "" {
		port, err := strconv.Atoi(portText)
		if err != nil || port < 1 || port > 65535 {
			return refuse("argument --port: invalid port value: %q", portText)
		}
		l.Port = port
	}
	for _, d := range []struct {
		flag, text string
		target     *float64
	}{
		{"--standin-load-seconds", loadText, &l.LoadSeconds},
		{"--standin-shutdown-seconds", shutdownText, &l.ShutdownSeconds},
	} {
		if d.text == "" {
			continue
		}
		seconds, err := parseSeconds(d.text)
		if err != nil {
			return refuse("argument %s: %v", d.flag, err)
		}
		*d.target = seconds
	}
	if l.ServedModelName == "" {
		l.ServedModelName = l.Model
	}
	if l.APIKey == "" && c.keyFromEnv {
		l.APIKey = getenv(vllmKeyEnv)
	}
	return l, nil
}

// isFlag follows argparse: "-" alone is a value, and so is a negative number.
func isFlag(token string) bool {
	if len(token) < 2 || token[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(token, 64)
	return err != nil
}

func parseSeconds(text string) (float64, error) {
	seconds, err := strconv.ParseFloat(text, 64)
	if err != nil || seconds < 0 || seconds > 3600 {
		return 0, fmt.Errorf("invalid seconds value: %q (0 to 3600)", text)
	}
	return seconds, nil
}
