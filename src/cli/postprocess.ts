// `profcpu postprocess`: not written yet.
import type { CommandModule } from 'yargs';
import { ProfcpuError } from '../error.js';

const command: CommandModule = {
  command: 'postprocess',
  describe: '(not implemented yet)',
  handler: () => {
    throw new ProfcpuError('USAGE', '`profcpu postprocess` is not implemented yet');
  },
};

export default command;
