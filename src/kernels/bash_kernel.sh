# runbox's Bash kernel: a live interactive bash for a session's stateful
# calls, so its working directory, variables, functions and aliases persist.
# bash reads its commands from fd 0, the kernel's socket, where runbox
# writes, per call, a few lines (the code quoted as $'...', every byte that
# is not plain ASCII as \xHH, so the line holds it whole, whatever it is):
#   __rbx_start ID
#   [builtin cd -- DIR, __rbx_env_set NAME VALUE..., on a call that has them]
#   __rbx_begin ID $'CODE'
#   [[ $__rbx_ok ]] && { eval "$__rbx_code"; } </dev/null
# An interactive shell is what makes SIGINT stop the command that runs and
# go on to the next, like Ctrl-C at a prompt; PROMPT_COMMAND, run before
# each prompt, reports the end of a call on fd 3: "D ID STATUS", or
# "S ID" when the code did not parse (then nothing of it ran).
PS1= PS2= PS4=
unset HISTFILE
set +o history
__rbx_state=idle
# The call is taken: its mark opens stdout and stderr, and "B ID" says so on
# fd 3; what came before belongs to no call (kernels/wire.h).
__rbx_start() {
    builtin printf '\036runbox:%s\036' "$1"
    builtin printf '\036runbox:%s\036' "$1" >&2
    builtin printf 'B %s\n' "$1" >&3
}
__rbx_begin() {
    __rbx_id=$1 __rbx_code=$2 __rbx_ok=
    # The code as a function's body: parsed whole, none of it run.
    if source /dev/stdin <<<"__rbx_check() { ${__rbx_code}"$'\n}'; then
        __rbx_ok=1
        unset -f __rbx_check
    fi
    __rbx_state=armed
}
__rbx_prompt() {
    local status=$?
    case $__rbx_state in
    armed) __rbx_state=running ;;
    running)
        __rbx_state=idle
        if [[ $__rbx_ok ]]; then printf 'D %s %s\n' "$__rbx_id" "$status" >&3
        else printf 'S %s\n' "$__rbx_id" >&3; fi ;;
    esac
}
# Per-call environment: saved, set, and put back after the call.
__rbx_env_set() {
    __rbx_saved=()
    while (($#)); do
        if [[ -v $1 ]]; then __rbx_saved+=("$1" "1${!1}"); else __rbx_saved+=("$1" "0"); fi
        export "$1=$2"
        shift 2
    done
}
__rbx_env_restore() {
    set -- "${__rbx_saved[@]}"
    while (($#)); do
        if [[ ${2:0:1} == 1 ]]; then export "$1=${2:1}"; else unset "$1"; fi
        shift 2
    done
    __rbx_saved=()
}
PROMPT_COMMAND=__rbx_prompt
printf R >&4
exec 4>&-
