# runbox's Python kernel: a live interpreter for a session's stateful calls.
# Reads one request per line (JSON) on fd 3 and answers on fd 3 with events,
# one JSON object per line: "display" for each rich output, then "done".
# The program's stdout and stderr are the sandbox's (runbox reads them
# between a request and its "done"). Nothing of the user's code runs before
# it has compiled; its globals live in a __main__ module of their own.
import ast
import base64
import builtins
import json
import os
import re
import signal
import socket
import sys
import traceback
import types

channel = socket.socket(fileno=3)
requests = channel.makefile("rb")
main = types.ModuleType("__main__")
main.__dict__["__builtins__"] = builtins
sys.modules["__main__"] = main
# Whole lines reach runbox as one chunk (print writes its text and its end
# apart, which PYTHONUNBUFFERED would pass on as two), as Jupyter's streams
# do; send() and the end of each call flush what is left of a line.
for _stream in (sys.stdout, sys.stderr):
    _stream.reconfigure(line_buffering=True, write_through=False)
count = 0
running = False
REPRS = (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
         ("_repr_svg_", "image/svg+xml"), ("_repr_png_", "image/png"),
         ("_repr_jpeg_", "image/jpeg"), ("_repr_json_", "application/json"),
         ("_repr_latex_", "text/latex"), ("_repr_javascript_", "application/javascript"),
         ("_repr_pdf_", "application/pdf"))


def send(event):
    # What the cell printed before this event is in the output pipes first,
    # so that a client sees a plot after the text that came before it.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    channel.sendall((json.dumps(event, default=str) + "\n").encode())


def encoded(mime, value):
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if mime == "application/json" and isinstance(value, str):
        return json.loads(value)
    return value


def bundle(obj):
    """Jupyter's MIME bundle of obj: its _repr_*_ methods, text/plain always."""
    data = {}
    if not isinstance(obj, type):
        method = getattr(obj, "_repr_mimebundle_", None)
        if callable(method):
            try:
                found = method()
                found = found[0] if isinstance(found, tuple) else found
                for mime, value in (found or {}).items():
                    data[mime] = encoded(mime, value)
            except Exception:
                pass
        for name, mime in REPRS:
            method = getattr(obj, name, None)
            if mime in data or not callable(method):
                continue
            try:
                value = method()
            except Exception:
                continue
            if isinstance(value, tuple):
                value = value[0]
            if value is not None:
                data[mime] = encoded(mime, value)
    if "text/plain" not in data:
        try:
            data["text/plain"] = repr(obj)
        except Exception as exc:
            data["text/plain"] = f"<repr failed: {type(exc).__name__}>"
    return data


def display(*objects, raw=False):
    """Shows each object as a rich output; raw=True: each is a MIME bundle already."""
    for obj in objects:
        send({"type": "display", "kind": "display_data",
              "data": dict(obj) if raw else bundle(obj)})


builtins.display = display


def show_figures():
    """matplotlib figures left open are shown as PNG, like Jupyter's inline backend."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if not pyplot:
        return
    import io
    for number in pyplot.get_fignums():
        figure = pyplot.figure(number)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", bbox_inches="tight")
        display({"image/png": base64.b64encode(buffer.getvalue()).decode(),
                 "text/plain": repr(figure)}, raw=True)
    pyplot.close("all")


def on_interrupt(signum, frame):
    if running:
        raise KeyboardInterrupt
    # Between calls an interrupt has nothing to stop.


signal.signal(signal.SIGINT, on_interrupt)


def user_traceback(exc):
    """The exception as Python prints it, without this kernel's own frames
    (this file is "<string>" to Python: it came with -c)."""
    summary = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    summary.stack = traceback.StackSummary.from_list(
        [frame for frame in summary.stack if frame.filename != "<string>"])
    return "".join(summary.format())


def shell(command, capture=False):
    """A cell's `!command` line, as IPython (so E2B's run_code) runs it: bash
    in the sandbox, its output into the cell's, its exit status not an error.
    `name = !command` gives the output's lines instead."""
    import subprocess
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if not capture:
        subprocess.run(command, shell=True, executable="/bin/bash")
        return None
    done = subprocess.run(command, shell=True, executable="/bin/bash",
                          stdout=subprocess.PIPE, text=True, errors="replace")
    return done.stdout.splitlines()


main.__dict__["__runbox_shell__"] = shell
SHELL_LINE = re.compile(r"^(\s*)(?:([A-Za-z_][A-Za-z0-9_]*)\s*=\s*)?!(.*)$")


def shell_lines(code):
    """IPython's `!command` lines as calls of shell(); None when there are none.
    Only code that is not Python already gets here, so Python keeps its meaning
    (`a = !b` and `!x` are never valid Python). Not expanded: $name and {expr}."""
    lines, changed = code.split("\n"), False
    for i, line in enumerate(lines):
        found = SHELL_LINE.match(line)
        if found and found.group(3).strip():
            indent, name, command = found.groups()
            call = f"__runbox_shell__({command.strip()!r}, capture={name is not None})"
            lines[i] = f"{indent}{name} = {call}" if name else f"{indent}{call}"
            changed = True
    return "\n".join(lines) if changed else None


def compiled(code):
    """The cell, and its last expression apart when it ends with one."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        tree = compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST | flags)
    except SyntaxError:
        rewritten = shell_lines(code)
        if rewritten is None:
            raise
        try:
            tree = compile(rewritten, "<cell>", "exec", ast.PyCF_ONLY_AST | flags)
        except SyntaxError:
            compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST | flags)  # the cell's own error
            raise
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), "<cell>", "eval", flags)
    return compile(tree, "<cell>", "exec", flags), last


loop = None


def run(code_object):
    global loop
    value = eval(code_object, main.__dict__)
    if code_object.co_flags & 0x80:  # CO_COROUTINE: the cell awaits at top level
        if loop is None:  # one loop for the kernel's life, so tasks outlive a cell
            import asyncio
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
        value = loop.run_until_complete(value)
    return value


def start(request):
    """The call is taken: its mark opens stdout and stderr (written to the
    descriptors, whatever the code made of sys.stdout), then "start" on the
    channel; what came before belongs to no call (kernels/wire.h)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    mark = f"\x1erunbox:{int(request.get('id', 0))}\x1e".encode()
    for fd in (1, 2):
        try:
            os.write(fd, mark)
        except OSError:
            pass
    send({"type": "start", "id": request.get("id")})


def execute(request):
    global count, running
    count += 1
    done = {"type": "done", "id": request.get("id"), "execution_count": count,
            "status": "ok", "exception": None}
    if request.get("cwd"):  # a fresh kernel's first call: where it was asked to start
        try:
            os.chdir(request["cwd"])
        except OSError as exc:
            sys.stderr.write(f"[runbox: cannot start in {request['cwd']}: {exc.strerror}]\n")
    saved = {name: os.environ.get(name) for name in request.get("env", {})}
    os.environ.update(request.get("env", {}))
    try:
        try:
            body, last = compiled(request["code"])
        except SyntaxError as exc:
            sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
            done.update(status="syntax", exception=type(exc).__name__)
            return done
        running = True
        try:
            run(body)
            value = run(last) if last else None
            running = False
            if value is not None:
                main.__dict__["_"] = value
                send({"type": "display", "kind": "execute_result", "data": bundle(value)})
        except KeyboardInterrupt as exc:
            running = False
            sys.stderr.write(user_traceback(exc))
            done.update(status="interrupted", exception="KeyboardInterrupt")
        except SystemExit as exc:
            running = False
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                sys.stderr.write(f"{exc.code}\n")
            done.update(status="exit" if code else "ok", exit_code=code)
        except BaseException as exc:
            running = False
            sys.stderr.write(user_traceback(exc))
            done.update(status="error", exception=type(exc).__name__)
        finally:
            running = False
        try:
            show_figures()
        except Exception as exc:
            sys.stderr.write(f"[runbox: cannot render the open figures: {exc}]\n")
        return done
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass


os.write(4, b"R")  # ready: runbox's report descriptor
os.close(4)
while True:
    try:
        line = requests.readline()
        if not line:
            break
        request = json.loads(line)
        start(request)
        send(execute(request))
    except KeyboardInterrupt:
        continue
