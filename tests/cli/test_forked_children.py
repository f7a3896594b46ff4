"""A process that has a Captioner or a Translator and forks (multiprocessing's fork start method, gunicorn's
--preload): the child captions and translates as the parent does. torch's thread pool does not survive a fork, and a
child computing on more than one thread waited for ever (text_attn.core.fork_safety). And threads sharing the objects
get what one call at a time gets."""

from __future__ import annotations

import json
import os
import select
import signal

import torch
from PIL import Image

from captioning import Captioner
from text_attn.translation.translator import Translator


def test_a_forked_child_captions_and_translates_as_its_parent():
    torch.set_num_threads(2)  # the test process's share may be one thread, and one thread never hung (restored after)
    captioner, translator = Captioner.load("shapes"), Translator.load("bahdanau")
    photo = Image.new("RGB", (128, 128), "white")
    photo.paste((200, 30, 30), (20, 20, 70, 70))

    def outputs() -> list[str]:
        return [repr(captioner.caption_images([photo])[0]), repr(translator.translate(["Ein Hund läuft."])[0])]

    expected = outputs()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its outputs through the pipe, then out without pytest's clean-up
        try:
            os.close(read)
            os.write(write, json.dumps([torch.get_num_threads(), outputs()]).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 60)
        assert ready, "the forked child did not answer in 60 s: it hangs on torch's threads"
        threads, got = json.loads(os.read(read, 1 << 16).decode())
    finally:
        os.close(read)
        if not os.waitpid(pid, os.WNOHANG)[0]:  # still running (hung): ended, then reaped
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert threads == 1 and got == expected and torch.get_num_threads() == 2  # the parent keeps its own


def test_threads_sharing_one_captioner_and_translator_get_what_one_at_a_time_gets():
    from concurrent.futures import ThreadPoolExecutor

    captioner, translator = Captioner.load("shapes"), Translator.load("bahdanau")
    photos = []
    for k in range(4):
        photo = Image.new("RGB", (128, 128), "white")
        photo.paste((40 * k, 200 - 40 * k, 90), (10 + 15 * k, 20, 60 + 15 * k, 90))
        photos.append(photo)
    sentences = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch.",
                 "Kinder spielen Fußball auf einer Wiese."]  # fmt: skip

    def work(k: int) -> str:  # captions and translations interleaved across the threads
        return repr(
            captioner.caption_images([photos[k // 2]])[0] if k % 2 else translator.translate([sentences[k // 2]])[0]
        )

    alone = [work(k) for k in range(8)]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(work, range(8))) == alone
