"""A third-party program built on E2B's SDK runs against runbox unmodified (issue 32): Hugging
Face's smolagents (from the package index, pinned in mk/e2b.mk), whose CodeAgent runs the code
its model writes in an E2B sandbox with executor_type="e2b". Only E2B_API_URL, E2B_SANDBOX_URL
and E2B_API_KEY are set. The model is the test's: a script of two replies, as an LLM would
write them (smolagents parses the code out of them), so the run needs no model provider."""
import pytest

smolagents = pytest.importorskip("smolagents")
from e2b_code_interpreter import Sandbox  # noqa: E402
from smolagents import CodeAgent  # noqa: E402
from smolagents.models import ChatMessage, MessageRole, Model  # noqa: E402

API_KEY = "runbox-third-party"


class ScriptedModel(Model):
    """Answers each step with the next of its replies."""

    def __init__(self, replies):
        super().__init__(model_id="scripted")
        self.replies = list(replies)

    def generate(self, messages, stop_sequences=None, response_format=None,
                 tools_to_call_from=None, **kwargs):
        return ChatMessage(role=MessageRole.ASSISTANT, content=self.replies.pop(0))


@pytest.fixture
def e2b_env(e2b_server, monkeypatch):
    monkeypatch.delenv("E2B_DEBUG", raising=False)
    monkeypatch.setenv("E2B_API_URL", e2b_server.e2b_url)
    monkeypatch.setenv("E2B_SANDBOX_URL", e2b_server.e2b_url)
    monkeypatch.setenv("E2B_API_KEY", API_KEY)
    return e2b_server


def test_a_smolagents_code_agent_runs_its_code_in_a_runbox_sandbox(e2b_env):
    agent = CodeAgent(tools=[], model=ScriptedModel([
        "Thought: compute it, keep it in a file too.\n<code>\nanswer = 6 * 7\n"
        "open('made-by-the-agent.txt', 'w').write(str(answer))\nprint('answer is', answer)\n"
        "</code>",
        "Thought: the variable is still there.\n<code>\nfinal_answer(answer)\n</code>",
    ]), executor_type="e2b", verbosity_level=0)
    try:
        assert agent.run("What is 6 times 7?") == 42
        # The code ran in a sandbox of runbox's control plane, where its file is.
        listed = Sandbox.list().next_items()
        assert [s.sandbox_id for s in listed] == [agent.python_executor.sandbox.sandbox_id]
        sandbox = Sandbox.connect(listed[0].sandbox_id)
        assert sandbox.files.read("made-by-the-agent.txt") == "42"
    finally:
        agent.cleanup()  # smolagents kills its sandbox
    assert Sandbox.list().next_items() == []
