// The image picker: the root images this server lets a run name (GET
// /v1/images), each with the languages it has an interpreter for. The
// first choice sends no image (the server's default, which the list names);
// an image without the chosen language's interpreter cannot be picked for
// it, so a run never meets the 400 that would follow.
import { apiJSON } from './api.js';
import { byId, el } from './dom.js';

export class ImagePicker {
  constructor() {
    this.select = byId('image');
    this.images = [];
    this.language = null;
  }

  // The image a run names, or null for the server's default.
  value() {
    return this.select.value || null;
  }

  async load() {
    let answer;
    try {
      answer = await apiJSON('/v1/images');
    } catch {
      return; // an older server, or none: runs name no image
    }
    const chosen = this.select.value;
    this.images = Array.isArray(answer.images) ? answer.images : [];
    this.select.replaceChildren(
      el('option', { value: '', text: `server default (${String(answer.default ?? '?')})` }),
      ...this.images.map((image) => el('option', {
        value: String(image.name),
        text: String(image.name),
        title: `${image.source || ''}; runs ${(image.languages || []).join(', ') || 'none of the languages'}`,
      })),
    );
    if (this.images.some((image) => image.name === chosen)) this.select.value = chosen;
    this.fit(this.language);
  }

  // Only images with the language's interpreter may be picked; a choice
  // that has none goes back to the server's default.
  fit(language) {
    this.language = language;
    for (const option of this.select.options) {
      const image = this.images.find((candidate) => candidate.name === option.value);
      option.disabled = Boolean(image && language && !(image.languages || []).includes(language));
    }
    if (this.select.selectedOptions[0]?.disabled) this.select.value = '';
  }
}
